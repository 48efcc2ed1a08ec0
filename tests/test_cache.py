"""The result cache (.torchlint_cache/): a cached answer is the answer `--no-cache` gives, whatever happened to
the project in between; and an entry torchlint did not write itself is never believed."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import lint_in_process as lint

TRAIN = ("from engine import step\n"
         "for x, y in loader:\n"
         "    loss = crit(model(x), y)\n"
         "    loss.backward()\n"
         "    step(optimizer)\n")
STEPS_ONLY = "def step(opt):\n    opt.step()\n"  # a caller's loop never clears the gradients: TL004 there
STEPS_AND_ZEROES = "def step(opt):\n    opt.step()\n    opt.zero_grad()\n"  # a correct helper: nothing to report


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def same_as_uncached(run_cli, root: Path) -> str:
    """The cached run's output, after checking that it is what an uncached run prints (`run_cli`: through the
    console script, with its worker processes; None: in this process)."""
    if run_cli is None:
        (code, cached), fresh = lint(root), lint(root, "--no-cache")
    else:
        done = run_cli("--format", "json", cwd=root)
        assert done.returncode in (0, 1), done.stderr
        code, cached = done.returncode, done.stdout
        again = run_cli("--format", "json", "--no-cache", cwd=root)
        fresh = (again.returncode, again.stdout)
    assert code in (0, 1)
    assert (code, cached) == fresh
    return cached


def test_identical_files_in_two_folders_get_their_own_answers(tmp_path, run_cli):
    write(tmp_path, {"a/train.py": TRAIN, "a/engine.py": STEPS_AND_ZEROES,
                     "b/train.py": TRAIN, "b/engine.py": STEPS_ONLY})
    cold = same_as_uncached(run_cli, tmp_path)  # one run, cold: each of the two identical files has its own entry
    assert '"path": "b/train.py"' in cold and "b/engine.py:2" in cold and "a/train.py" not in cold
    assert same_as_uncached(run_cli, tmp_path) == cold


def test_creating_a_helper_that_was_missing_invalidates(tmp_path):
    write(tmp_path, {"sub/train.py": TRAIN})
    assert '"code"' not in same_as_uncached(None, tmp_path)
    write(tmp_path, {"engine.py": STEPS_ONLY})  # found from sub/ through the project root
    assert "TL004" in same_as_uncached(None, tmp_path)


def test_a_helper_that_shadows_the_one_read_invalidates(tmp_path):
    write(tmp_path, {"sub/train.py": TRAIN, "engine.py": STEPS_ONLY})
    assert "TL004" in same_as_uncached(None, tmp_path)
    write(tmp_path, {"sub/engine.py": STEPS_AND_ZEROES})  # the script's own folder comes first on sys.path
    assert '"code"' not in same_as_uncached(None, tmp_path)
    (tmp_path / "sub" / "engine.py").unlink()  # and a branch switch back
    assert "TL004" in same_as_uncached(None, tmp_path)


def test_a_package_that_shadows_a_module_invalidates(tmp_path):
    """Python imports the package `lib/engine/` before the module `lib/engine.py` beside it: a result cached while
    only the module existed is stale once the package appears, and a module added beside a package changes nothing."""
    write(tmp_path, {"train.py": TRAIN.replace("from engine import step", "from lib.engine import step"),
                     "lib/__init__.py": "", "lib/engine.py": STEPS_ONLY})
    assert "TL004" in same_as_uncached(None, tmp_path)
    write(tmp_path, {"lib/engine/__init__.py": STEPS_AND_ZEROES})  # imported before the module of the same name
    assert '"code"' not in same_as_uncached(None, tmp_path)
    write(tmp_path, {"lib/engine/__init__.py": STEPS_ONLY, "lib/engine.py": STEPS_AND_ZEROES})
    assert "TL004" in same_as_uncached(None, tmp_path)


def entries(root: Path) -> list[Path]:
    """The result entries of the cache (not the exports it also keeps)."""
    found = [p for p in (root / ".torchlint_cache").rglob("*.json") if "exports" not in p.parts]
    assert found
    return found


def rewrite_entries(root: Path, change) -> None:
    for path in entries(root):
        path.write_text(json.dumps(change(json.loads(path.read_text()))))


DIAG = {"line": 1, "column": 1, "end_line": 1, "end_column": 1, "code": "TL004", "message": "m"}
WRONG_SHAPES = [
    [], "x", {"diags": 3}, {"deps": [], "diags": []}, {"deps": {"engine.py": 3}, "diags": []}, {"deps": {}},
    {"deps": {}, "diags": [{"line": 1}]}, {"deps": {}, "diags": [None]}, {"deps": {}, "diags": [{**DIAG, "line": "1"}]},
    {"deps": {}, "diags": [{**DIAG, "line": True}]}, {"deps": {}, "diags": [{**DIAG, "cell": "one"}]},
    {"deps": {}, "diags": [{**DIAG, "fix": {"applicability": "safe", "message": "m", "edits": [{}]}}]},
    {"deps": {}, "diags": [{**DIAG, "fix": {"applicability": "safe", "message": "m", "edits": None}}]},
]


def test_an_entry_of_the_wrong_shape_is_a_miss(tmp_path):
    write(tmp_path, {"sub/train.py": TRAIN, "engine.py": STEPS_ONLY})
    first = same_as_uncached(None, tmp_path)
    for wrong in WRONG_SHAPES:
        rewrite_entries(tmp_path, lambda entry: wrong)
        assert same_as_uncached(None, tmp_path) == first, wrong


@pytest.mark.parametrize("dep", ["../outside.py", "/OUTSIDE", "sub/../../outside.py"])
def test_a_dependency_outside_the_project_is_a_miss(tmp_path, dep):
    project, outside = tmp_path / "project", tmp_path / "outside.py"
    write(project, {"sub/train.py": TRAIN, "engine.py": STEPS_ONLY})
    outside.write_text("print('not part of the project')\n")
    same_as_uncached(None, project)
    digest = hashlib.blake2b(outside.read_bytes(), digest_size=20).hexdigest()
    dep = dep.replace("/OUTSIDE", str(outside))
    # an entry that would hold as long as a file outside the project is unchanged: it says nothing is wrong
    rewrite_entries(project, lambda entry: {"deps": {dep: digest}, "diags": []})
    assert "TL004" in same_as_uncached(None, project)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_never_opened_as_a_dependency(tmp_path):
    write(tmp_path, {"sub/train.py": TRAIN, "engine.py": STEPS_ONLY})
    exe = shutil.which("torchlint")
    cached = subprocess.run([exe, "-q", "."], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    os.mkfifo(tmp_path / "sub" / "pipe.py")
    rewrite_entries(tmp_path, lambda entry: {**entry, "deps": {**entry["deps"], "sub/pipe.py": None}})
    again = subprocess.run([exe, "-q", "."], cwd=tmp_path, capture_output=True, text=True, timeout=20)
    assert again.stdout == cached.stdout and "TL004" in again.stdout


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("cache", ["--no-cache", "--jobs=1"])
def test_a_fifo_where_an_import_points_is_not_read(tmp_path, cache):
    write(tmp_path, {"train.py": TRAIN})
    os.mkfifo(tmp_path / "engine.py")  # never a file to check, and no helper to read: the run goes on
    done = subprocess.run([shutil.which("torchlint"), "-q", cache, "."], cwd=tmp_path, capture_output=True,
                          text=True, timeout=20)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def as_machine(monkeypatch, home: Path) -> None:
    """Runs from here on are this process's as a user of another machine: their own per-machine cache key."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))


def test_results_shipped_with_a_repository_are_not_believed(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    write(repo, {"sub/train.py": TRAIN, "engine.py": STEPS_ONLY})
    as_machine(monkeypatch, tmp_path / "attacker")
    assert "TL004" in lint(repo)[1]
    rewrite_entries(repo, lambda entry: {**entry, "diags": []})  # forged: nothing to report
    assert lint(repo) == (0, "[]\n")  # believed where they were written (the attacker's own cache)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-f", "."], cwd=repo, check=True)  # tracked, as a repository would ship them
    as_machine(monkeypatch, tmp_path / "victim")
    assert "TL004" in same_as_uncached(None, repo)


def test_exports_shipped_with_a_repository_are_not_believed(tmp_path, monkeypatch):
    """The exports of a correct helper, filed under the hash of a helper that never clears the gradients."""
    repo = tmp_path / "repo"
    write(repo, {"sub/train.py": TRAIN, "engine.py": STEPS_AND_ZEROES})
    as_machine(monkeypatch, tmp_path / "attacker")
    assert lint(repo) == (0, "[]\n")
    (good,) = (repo / ".torchlint_cache").rglob("exports/*/*/*.json")
    write(repo, {"engine.py": STEPS_ONLY})
    digest = hashlib.blake2b((repo / "engine.py").read_bytes(), digest_size=20).hexdigest()
    forged = good.parent.parent / digest[:2] / f"{digest}.json"
    forged.parent.mkdir(exist_ok=True)
    shutil.copy(good, forged)
    for path in entries(repo):
        path.unlink()
    assert lint(repo) == (0, "[]\n")  # the attacker's own cache believes it
    as_machine(monkeypatch, tmp_path / "victim")
    assert "TL004" in same_as_uncached(None, repo)


def test_a_cache_folder_that_is_a_symlink_is_not_used(tmp_path, monkeypatch):
    repo, elsewhere = tmp_path / "repo", tmp_path / "elsewhere"
    write(repo, {"sub/train.py": TRAIN, "engine.py": STEPS_ONLY})
    elsewhere.mkdir()
    (repo / ".torchlint_cache").symlink_to(elsewhere, target_is_directory=True)
    assert "TL004" in same_as_uncached(None, repo)
    assert list(elsewhere.iterdir()) == []  # nothing written through a link the repository may have planted


def test_without_a_place_for_the_key_nothing_is_cached(tmp_path, monkeypatch):
    write(tmp_path, {"sub/train.py": TRAIN, "engine.py": STEPS_ONLY})
    (tmp_path / "not-a-folder").write_text("")
    as_machine(monkeypatch, tmp_path / "not-a-folder")
    assert "TL004" in same_as_uncached(None, tmp_path)
    assert not (tmp_path / ".torchlint_cache").exists()


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_a_key_others_can_read_is_not_used(tmp_path, monkeypatch):
    write(tmp_path, {"sub/train.py": TRAIN, "engine.py": STEPS_ONLY})
    as_machine(monkeypatch, tmp_path / "home")
    same_as_uncached(None, tmp_path)
    (key,) = (tmp_path / "home" / "torchlint").iterdir()
    assert key.stat().st_mode & 0o777 == 0o600
    shutil.rmtree(tmp_path / ".torchlint_cache")
    key.chmod(0o644)
    assert "TL004" in same_as_uncached(None, tmp_path)
    assert not (tmp_path / ".torchlint_cache").exists()


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks here")
def test_a_dangling_symlink_that_shadows_the_helper_invalidates(tmp_path):
    """Found by tests/test_cache_property.py: a link to nothing is no file to read, but it is where an import
    stops looking."""
    write(tmp_path, {"sub/train.py": TRAIN, "engine.py": STEPS_ONLY})
    assert "TL004" in same_as_uncached(None, tmp_path)
    (tmp_path / "sub" / "engine.py").symlink_to("../nothing.py")
    same_as_uncached(None, tmp_path)
