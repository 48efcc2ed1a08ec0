"""The package passes its static checks: flake8 with the project's .flake8, and mypy with pyproject.toml's
[tool.mypy]. Both run as a developer runs them, from the repository root, so the test command CI runs checks them
too."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_flake8_is_clean():
    out = _run("flake8", "torchlint")
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_is_clean():
    out = _run("mypy")  # files and options from pyproject.toml
    assert out.returncode == 0, out.stdout + out.stderr
