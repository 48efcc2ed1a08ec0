"""Standard input and files that are no regular files (a FIFO, `<(...)`, /dev/stdin) through the real command:
they are read and checked, or refused with one line and exit 2; never "All checks passed (0 files)"."""

from __future__ import annotations

import json
import os
import threading

import pytest

from tests.test_cli import BUGGY, CLEAN
from tests.test_notebook import SETUP, TRAIN, notebook

FINDING = ":4:5: TL004 [unsafe fix] `optimizer.step()` runs in a loop"
FIXABLE = ("running = 0.0\nfor x, y in loader:\n    loss = crit(model(x), y)\n    optimizer.zero_grad()\n"
           "    loss.backward()\n    optimizer.step()\n    running += loss\nprint(running)\n")


def _one_error_line(r, *words: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("torchlint: error: ") and all(w in lines[0] for w in words), lines


def test_dash_reads_standard_input(tmp_path, run_cli):
    r = run_cli("--isolated", "-", cwd=tmp_path, input=BUGGY)
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines()[0].startswith("-" + FINDING)
    assert "Found 1 problem in 1 file." in r.stdout
    clean = run_cli("--isolated", "-", cwd=tmp_path, input=CLEAN)
    assert (clean.returncode, clean.stdout.strip()) == (0, "All checks passed (1 file).")


def test_stdin_filename_names_it_and_picks_its_configuration(tmp_path, run_cli):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint.per-file-ignores]\n"legacy/*" = ["TL004"]\n')
    r = run_cli("--stdin-filename", "src/train.py", "-", cwd=tmp_path, input=BUGGY)
    assert r.returncode == 1 and r.stdout.splitlines()[0].startswith("src/train.py" + FINDING)
    ignored = run_cli("--stdin-filename", "legacy/train.py", cwd=tmp_path, input=BUGGY)  # no path: standard input
    assert (ignored.returncode, ignored.stdout.strip()) == (0, "All checks passed (1 file).")


def test_a_notebook_on_standard_input(tmp_path, run_cli):
    r = run_cli("--isolated", "-q", "--stdin-filename", "nb.ipynb", "-", cwd=tmp_path,
                input=notebook([SETUP, TRAIN]))
    assert r.stdout.startswith("nb.ipynb:cell 4:5:5: TL004")


def test_dev_stdin_and_a_pipe_named_on_the_command_line(tmp_path, run_cli):
    """`cat train.py | torchlint /dev/stdin` checks what the pipe holds, in process and with workers."""
    for jobs in ("1", "2"):
        r = run_cli("--isolated", "--no-cache", "--jobs", jobs, "/dev/stdin", cwd=tmp_path, input=BUGGY)
        assert r.returncode == 1, (jobs, r.stdout, r.stderr)
        assert r.stdout.splitlines()[0].startswith("/dev/stdin" + FINDING)


def _fed_fifo(path, text: str) -> threading.Thread:
    """A FIFO at `path`, and a thread that writes `text` into it once a reader opens it."""
    os.mkfifo(path)

    def feed():
        with open(path, "w") as fh:
            fh.write(text)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    return writer


def test_a_named_fifo(tmp_path, run_cli):
    writer = _fed_fifo(tmp_path / "train.py", BUGGY)
    r = run_cli("--isolated", "--no-cache", "train.py", cwd=tmp_path)
    writer.join(timeout=30)
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines()[0].startswith("train.py" + FINDING)


def test_fix_of_standard_input_writes_the_fixed_source_to_stdout(tmp_path, run_cli):
    r = run_cli("--isolated", "--fix", "-", cwd=tmp_path, input=FIXABLE)
    assert r.returncode == 0, r.stderr
    assert r.stdout == FIXABLE.replace("running += loss", "running += loss.item()")
    unchanged = run_cli("--isolated", "--fix", "-", cwd=tmp_path, input=BUGGY)
    assert unchanged.stdout == BUGGY and unchanged.returncode == 1
    assert "-" + FINDING in unchanged.stderr


def test_diff_of_standard_input(tmp_path, run_cli):
    r = run_cli("--isolated", "--diff", "--stdin-filename", "t.py", cwd=tmp_path, input=FIXABLE)
    assert r.returncode == 1 and "+    running += loss.item()" in r.stdout and "--- a/t.py" in r.stdout


@pytest.mark.parametrize("args, words", [
    (("--add-noqa", "-"), ("--add-noqa", "standard input")),
    (("--fix", "-", "other.py"), ("standard input",)),
    (("--fix", "--verify", "-"), ("standard input",)),
])
def test_what_cannot_be_done_with_standard_input_is_refused(tmp_path, run_cli, args, words):
    (tmp_path / "other.py").write_text(BUGGY)
    _one_error_line(run_cli("--isolated", *args, cwd=tmp_path, input=FIXABLE), *words)


def test_fix_of_a_fifo_is_refused(tmp_path, run_cli):
    os.mkfifo(tmp_path / "train.py")
    _one_error_line(run_cli("--isolated", "--fix", "train.py", cwd=tmp_path), "train.py", "not a regular file")


def test_json_of_standard_input(tmp_path, run_cli):
    r = run_cli("--isolated", "--format", "json", "--stdin-filename", "a.py", cwd=tmp_path, input=BUGGY)
    assert [(d["path"], d["line"], d["code"]) for d in json.loads(r.stdout)] == [("a.py", 4, "TL004")]


def test_format_full_shows_the_lines_read_and_never_reads_a_stream_again(tmp_path, run_cli):
    """`--format full` shows the lines the command read: standard input's (not those of a file on disk named by
    --stdin-filename), and a FIFO's without opening it a second time (no writer would come)."""
    (tmp_path / "shown.py").write_text("# not what was checked\n" * 5)
    r = run_cli("--isolated", "--format", "full", "--stdin-filename", "shown.py", cwd=tmp_path, input=BUGGY)
    assert "4 |     optimizer.step()" in r.stdout, r.stdout
    _fed_fifo(tmp_path / "train.py", BUGGY)
    r = run_cli("--isolated", "--no-cache", "--format", "full", "train.py", cwd=tmp_path)
    assert "4 |     optimizer.step()" in r.stdout, r.stdout


def test_a_plain_check_of_standard_input_reports_what_fix_would_fix(tmp_path, run_cli):
    r = run_cli("--isolated", "-q", "-", cwd=tmp_path, input=FIXABLE)
    assert r.returncode == 1 and r.stdout.startswith("-:7:5: TL007 [*]"), r.stdout


def test_a_regular_file_under_dev_is_fixed_as_any_file(run_cli, tmp_path):
    folder = "/dev/shm"
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        pytest.skip("no writable /dev/shm")
    path = os.path.join(folder, f"torchlint-test-{os.getpid()}.py")
    try:
        with open(path, "w") as fh:
            fh.write(FIXABLE)
        r = run_cli("--isolated", "--no-cache", "--fix", path, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert open(path).read() == FIXABLE.replace("+= loss", "+= loss.item()")
    finally:
        os.unlink(path)
