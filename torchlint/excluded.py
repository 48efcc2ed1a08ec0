"""The folders and files a walk of a project skips by default: version control, virtual environments, caches,
build outputs, installed packages, and the metadata macOS leaves in archives (`__MACOSX/`, AppleDouble `._name`
files: resource forks, not Python or notebooks). Read by `config` (the file walk's default `exclude`) and by `project_callers`
(the folders it searches for a helper's callers), so both skip the same ones."""

from __future__ import annotations

import fnmatch
import re

DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".env", "env", ".tox", ".nox", "__pycache__", "build", "dist",
    ".eggs", "*.egg-info", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".torchlint_cache", "node_modules",
    "site-packages", "__MACOSX", "._*",
)
_DEFAULT = re.compile("|".join(fnmatch.translate(p) for p in DEFAULT_EXCLUDE))


def excluded_by_default(name: str) -> bool:
    """Does a folder's (or file's) own name match one of the default patterns (`build`, `pkg.egg-info`)?"""
    return _DEFAULT.match(name) is not None
