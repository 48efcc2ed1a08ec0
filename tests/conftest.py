"""Shared fixtures: run the real `torchlint` console script in a subprocess."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent


def positive_sources() -> Iterator[tuple[str, str]]:
    """(rule code, source) of every fixture's bad.py and every positive example in tests/rules/."""
    from torchlint.rules import ALL_RULES

    for path in sorted((ROOT / "fixtures").glob("TL*/*/bad.py")):
        if len(list(path.parent.glob("*.py"))) > 3:
            continue  # it calls a helper module beside it: a project, checked as one by tests/test_fixtures.py
        yield path.parent.parent.name, path.read_text()
    for rule in ALL_RULES:
        mod = importlib.import_module(f"tests.rules.test_{rule.code.lower()}")
        for src, _ in mod.POSITIVE.values():
            yield rule.code, textwrap.dedent(src)


@pytest.fixture
def run_cli():
    exe = shutil.which("torchlint")
    assert exe is not None, "the torchlint console script is not installed (pip install -e '.[test]')"

    def run(*args: str, cwd: Path | None = None, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, input=input, timeout=120)

    return run


@pytest.fixture(scope="session")
def device() -> str:
    """TORCHLINT_DEVICE (cpu by default), for the tests that run training scripts: they skip without torch, and
    with cuda but no GPU (.ci/cuda refuses to call that a pass)."""
    torch = pytest.importorskip("torch")
    name = os.environ.get("TORCHLINT_DEVICE", "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip("TORCHLINT_DEVICE=cuda but no CUDA device is available")
    return name


def fetched_dataset(variable: str, marker: str, how: str) -> Path:
    """The folder of fetched real code named by the environment variable `variable` (the output of a
    ../shared/*/materialize.sh), or a skip that says why. CI cannot fetch, so these tests skip there."""
    value = os.environ.get(variable)
    if not value:
        pytest.skip(f"{variable} is not set: {how}")
    folder = Path(value).expanduser().resolve()
    if not (folder / marker).is_file():
        pytest.fail(f"{variable}={value} is not a materialized data set: {folder / marker} is missing")
    return folder


@pytest.fixture
def python() -> str:
    return sys.executable
