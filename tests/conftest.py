"""Shared fixtures: run the real `torchlint` console script in a subprocess."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def run_cli():
    exe = shutil.which("torchlint")
    assert exe is not None, "the torchlint console script is not installed (pip install -e '.[test]')"

    def run(*args: str, cwd: Path | None = None, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, input=input, timeout=120)

    return run


@pytest.fixture
def python() -> str:
    return sys.executable
