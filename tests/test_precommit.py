"""The pre-commit hook, tested the way a user runs it: a temporary git repository whose .pre-commit-config.yaml
pins a committed snapshot of this working tree, and `pre-commit run` on it. (`pre-commit try-repo` installs the
hook's environment anew on every call; a pinned revision is installed once into PRE_COMMIT_HOME and reused.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

BUGGY = textwrap.dedent(
    """\
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    """
)


def _git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def precommit_home(tmp_path_factory):
    return tmp_path_factory.mktemp("pre-commit-home")


ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory):
    """A committed snapshot of this working tree (tracked and new files), as a user's pre-commit would fetch it."""
    dest = tmp_path_factory.mktemp("torchlint-repo")
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    for rel in listed:
        src = ROOT / rel
        if src.is_file() and not rel.startswith("fixtures/"):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "snapshot"]):
        subprocess.run(["git", *args], cwd=dest, check=True, capture_output=True, env=ENV)
    return dest


def _try_repo(repo, home, hook_repo, *files, hook="torchlint"):
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=hook_repo, capture_output=True, text=True,
                         check=True).stdout.strip()
    config = repo / ".pre-commit-config.yaml"
    config.write_text(f"repos:\n- repo: {hook_repo}\n  rev: {rev}\n  hooks:\n  - id: {hook}\n")
    _git("add", config.name, cwd=repo)
    env = dict(ENV, PRE_COMMIT_HOME=str(home))
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", hook, "--files", *files],
        cwd=repo, capture_output=True, text=True, env=env, timeout=900,
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_hook_fails_on_buggy_file_and_passes_on_clean(tmp_path, precommit_home, hook_repo):
    repo = tmp_path / "user-repo"
    repo.mkdir()
    _git("init", "-q", cwd=repo)
    (repo / "train.py").write_text(BUGGY)
    (repo / "clean.py").write_text("print('hello')\n")
    _git("add", ".", cwd=repo)
    r = _try_repo(repo, precommit_home, hook_repo, "train.py")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "train.py:4:5: TL004" in r.stdout
    r = _try_repo(repo, precommit_home, hook_repo, "clean.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Passed" in r.stdout


SAFE_ONLY = textwrap.dedent(
    """\
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward(retain_graph=True)
        optimizer.step()
    """
)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_fix_hook_rewrites_then_passes(tmp_path, precommit_home, hook_repo):
    repo = tmp_path / "user-repo"
    repo.mkdir()
    _git("init", "-q", cwd=repo)
    (repo / "train.py").write_text(SAFE_ONLY)
    _git("add", ".", cwd=repo)
    first = _try_repo(repo, precommit_home, hook_repo, "train.py", hook="torchlint-fix")
    assert first.returncode == 1, first.stdout + first.stderr
    assert "files were modified by this hook" in first.stdout
    assert (repo / "train.py").read_text() == SAFE_ONLY.replace("retain_graph=True", "")
    _git("add", ".", cwd=repo)
    second = _try_repo(repo, precommit_home, hook_repo, "train.py", hook="torchlint-fix")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Passed" in second.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_hook_checks_notebooks(tmp_path, precommit_home, hook_repo):
    import json

    repo = tmp_path / "nb-repo"
    repo.mkdir()
    _git("init", "-q", cwd=repo)
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                     "source": BUGGY.splitlines(keepends=True)}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (repo / "train.ipynb").write_text(json.dumps(nb, indent=1, sort_keys=True) + "\n")
    _git("add", ".", cwd=repo)
    r = _try_repo(repo, precommit_home, hook_repo, "train.ipynb")
    assert r.returncode == 1 and "train.ipynb:cell 1:4:5: TL004" in r.stdout, r.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_hook_follows_calls_into_the_project(tmp_path, precommit_home, hook_repo):
    """pre-commit passes only the changed file; the helper it calls lives in another file of the repository."""
    project = tmp_path / "engine_split"
    shutil.copytree(ROOT / "tests" / "projects" / "engine_split", project)
    _git("init", "-q", cwd=project)
    _git("add", ".", cwd=project)
    r = _try_repo(project, precommit_home, hook_repo, "main.py")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "main.py:14:5: TL004" in r.stdout and "(engine.py:8)" in r.stdout
