"""Which files a run checks (torchlint.files): odd entries in the tree never stop the run."""

from __future__ import annotations

import os

import pytest

BUGGY = "for x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"

pytestmark = pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks here")


@pytest.mark.parametrize("gitignore", [False, True])
def test_a_symlink_loop_is_skipped_with_a_warning(tmp_path, run_cli, gitignore):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(BUGGY)
    (tmp_path / "pkg" / "x.py").symlink_to("x.py")  # x.py -> x.py
    (tmp_path / "a.py").symlink_to("b.py")  # a.py -> b.py -> a.py
    (tmp_path / "b.py").symlink_to("a.py")
    (tmp_path / "data").symlink_to("data")  # not a source file's name: skipped all the same
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nextend-exclude = ["skip*"]\n'
                                             'per-file-ignores = {"other.py" = ["TL001"]}\n')
    (tmp_path / "skipped.py").symlink_to("skipped.py")  # excluded: nothing to say
    if gitignore:  # the .gitignore matching of each entry
        (tmp_path / ".git").mkdir()
        (tmp_path / ".gitignore").write_text("ignored.py\n")
        (tmp_path / "ignored.py").symlink_to("ignored.py")
    r = run_cli("-q", ".", cwd=tmp_path)
    assert (r.returncode, r.stdout.splitlines()[0][:20]) == (1, "pkg/train.py:4:5: TL"), r.stderr
    assert len(r.stdout.splitlines()) == 1
    assert r.stderr.splitlines() == [f"torchlint: warning: {name}: symlink loop; not checked"
                                     for name in ("a.py", "b.py", "data", "pkg/x.py")]


def test_a_symlink_loop_named_on_the_command_line(tmp_path, run_cli):
    (tmp_path / "x.py").symlink_to("x.py")
    r = run_cli("x.py", cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", "torchlint: error: x.py: symlink loop\n")


def test_the_metadata_macos_leaves_in_archives_is_skipped(tmp_path, run_cli):
    """`__MACOSX/` and AppleDouble `._name` files hold resource forks (null bytes), not notebooks or Python: a walk
    skips them by default, as it skips `__pycache__`, so they do not bury the findings in TL900 notices."""
    (tmp_path / "train.py").write_text(BUGGY)
    fork = b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        \x00\x02"
    (tmp_path / "__MACOSX" / "nb").mkdir(parents=True)
    (tmp_path / "__MACOSX" / "nb" / "._train.ipynb").write_bytes(fork)
    (tmp_path / "._train.py").write_bytes(fork)
    result = run_cli("--no-cache", ".", cwd=tmp_path)
    assert "TL900" not in result.stdout and "train.py:4:5: TL004" in result.stdout, result.stdout
    assert "in 1 file" in result.stdout, result.stdout
