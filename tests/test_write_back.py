"""Writing a user's file back (`--fix`, `--add-noqa`, `--fix --verify`): never over an edit saved since the file
was read, through a symlink to its target, in place when a rename would lose its hard links, owner or extended
attributes, and never into a read-only file."""

from __future__ import annotations

import os
import stat

import pytest

from torchlint import batch
from torchlint.batch import Job

BUGGY = "for x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"
FIXED = BUGGY + "    optimizer.zero_grad()\n"
EDITED = "# saved by the editor while torchlint was fixing\n" + BUGGY


def _edit_while(monkeypatch, module, name: str, path) -> None:
    """`module.name` writes EDITED into `path` before doing its work: an editor saving during the run."""
    real = getattr(module, name)

    def slow(*args, **kwargs):
        path.write_text(EDITED)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, slow)


@pytest.mark.parametrize("mode", ["fix", "noqa"])
def test_a_file_changed_since_it_was_read_is_not_written(tmp_path, monkeypatch, mode):
    import torchlint.add_noqa
    import torchlint.engine

    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    if mode == "fix":
        _edit_while(monkeypatch, torchlint.engine, "fix_source", path)
    else:
        _edit_while(monkeypatch, torchlint.add_noqa, "add_noqa", path)
    (outcome,) = batch.run([Job(str(path), ("TL004",), mode, unsafe=True)], 1, None)
    assert path.read_text() == EDITED
    assert outcome.applied == 0
    assert outcome.error == f"{path}: changed since torchlint read it; not written (run the command again)"


def test_the_command_says_which_file_it_did_not_write_and_exits_2(tmp_path, monkeypatch, capsys):
    import torchlint.engine
    from torchlint.cli import main

    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    other = tmp_path / "other.py"
    other.write_text(BUGGY)
    _edit_while(monkeypatch, torchlint.engine, "fix_source", path)
    monkeypatch.chdir(tmp_path)
    code = main(["--fix", "--unsafe-fixes", "--isolated", "--jobs", "1", "train.py"])
    err = capsys.readouterr().err
    assert code == 2
    assert "torchlint: error: train.py: changed since torchlint read it; not written (run the command again)" in err
    assert path.read_text() == EDITED


def test_a_symlink_is_written_through_to_its_target(tmp_path, run_cli):
    real = tmp_path / "src" / "train.py"
    real.parent.mkdir()
    real.write_text(BUGGY)
    link = tmp_path / "train.py"
    link.symlink_to(real)
    r = run_cli("--fix", "--unsafe-fixes", "--no-cache", "train.py", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == FIXED


def test_a_folder_run_fixes_the_real_file_and_keeps_the_link(tmp_path, run_cli):
    """The link sorts first (a.py -> b.py): the real file b.py is fixed, a.py stays a link to it, and a finding is
    reported once, under the real file's name."""
    real = tmp_path / "b.py"
    real.write_text(BUGGY)
    (tmp_path / "a.py").symlink_to("b.py")
    r = run_cli("--fix", "--unsafe-fixes", "--no-cache", ".", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "a.py").is_symlink() and os.readlink(tmp_path / "a.py") == "b.py"
    assert real.read_text() == FIXED
    report = run_cli("--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
    assert report.returncode == 0 and "All checks passed (1 file)." in report.stdout
    real.write_text(BUGGY)
    report = run_cli("--no-cache", "-q", ".", cwd=tmp_path)
    assert report.stdout.startswith("b.py:4:5: TL004"), report.stdout  # the real file's name, once


def test_a_read_only_file_is_refused(tmp_path, run_cli):
    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    path.chmod(0o444)
    r = run_cli("--fix", "--unsafe-fixes", "--no-cache", "train.py", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "torchlint: error: train.py: read-only; not written" in r.stderr
    assert path.read_text() == BUGGY and stat.S_IMODE(path.stat().st_mode) == 0o444
    r = run_cli("--add-noqa", "--no-cache", "train.py", cwd=tmp_path)
    assert r.returncode == 2 and "read-only; not written" in r.stderr
    assert path.read_text() == BUGGY


def test_hard_links_and_extended_attributes_are_kept(tmp_path, run_cli):
    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    twin = tmp_path / "twin.txt"
    os.link(path, twin)
    try:
        os.setxattr(path, "user.origin", b"notebook export")
    except OSError as exc:
        pytest.skip(f"this file system has no user extended attributes ({exc.strerror})")
    inode = path.stat().st_ino
    r = run_cli("--fix", "--unsafe-fixes", "--no-cache", "train.py", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert path.stat().st_ino == inode and path.stat().st_nlink == 2
    assert twin.read_text() == FIXED
    assert os.getxattr(path, "user.origin") == b"notebook export"


def test_extended_attributes_are_kept_on_an_atomic_write(tmp_path, run_cli):
    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    try:
        os.setxattr(path, "user.origin", b"notebook export")
    except OSError as exc:
        pytest.skip(f"this file system has no user extended attributes ({exc.strerror})")
    r = run_cli("--fix", "--unsafe-fixes", "--no-cache", "train.py", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert path.read_text() == FIXED and os.getxattr(path, "user.origin") == b"notebook export"


def test_the_owner_is_kept(tmp_path, run_cli):
    if os.geteuid() != 0:
        pytest.skip("only root can give a file another owner to check that the write keeps it")
    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    os.chown(path, 4321, 4322)
    r = run_cli("--fix", "--unsafe-fixes", "--no-cache", "train.py", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert path.read_text() == FIXED and (path.stat().st_uid, path.stat().st_gid) == (4321, 4322)
