"""Many files: parallel jobs, the content-hash cache, per-file time limit, odd files."""

from __future__ import annotations

import multiprocessing
import os

import libcst
import pytest

from torchlint import batch
from torchlint.batch import Job

BUGGY = "for x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"
CODES = ("TL001", "TL002", "TL003", "TL004", "TL005")


def make_tree(root, n=12):
    for i in range(n):
        sub = root / f"pkg{i % 3}"
        sub.mkdir(exist_ok=True)
        (sub / f"m{i}.py").write_text(BUGGY if i % 2 else "print('no training here')\n")


def test_jobs_give_the_same_output(tmp_path, run_cli):
    make_tree(tmp_path)
    one = run_cli("-q", "--no-cache", "--jobs", "1", cwd=tmp_path)
    two = run_cli("-q", "--no-cache", "--jobs", "2", cwd=tmp_path)
    assert one.returncode == two.returncode == 1
    assert one.stdout == two.stdout
    assert len(one.stdout.splitlines()) == 6
    assert one.stdout.splitlines() == sorted(one.stdout.splitlines(), key=lambda s: (s.split(":")[0], int(s.split(":")[1])))


def test_cache_is_created_ignored_and_reused(tmp_path, run_cli):
    make_tree(tmp_path)
    cold = run_cli("-q", cwd=tmp_path)
    assert (tmp_path / ".torchlint_cache" / ".gitignore").read_text().endswith("*\n")
    warm = run_cli("-q", cwd=tmp_path)
    assert cold.stdout == warm.stdout and warm.returncode == 1
    (tmp_path / "pkg1" / "m1.py").write_text(BUGGY.replace("optimizer.step()", "optimizer.step()\n    optimizer.zero_grad()"))
    changed = run_cli("-q", cwd=tmp_path)
    assert len(changed.stdout.splitlines()) == 5


def test_no_cache_writes_nothing(tmp_path, run_cli):
    make_tree(tmp_path, 2)
    run_cli("-q", "--no-cache", cwd=tmp_path)
    assert not (tmp_path / ".torchlint_cache").exists()


def test_warm_run_parses_nothing(tmp_path, monkeypatch):
    make_tree(tmp_path, 6)
    jobs = [Job(str(p), CODES) for p in sorted(tmp_path.rglob("*.py"))]
    cold = list(batch.run(jobs, 1, tmp_path))
    calls = []
    real = libcst.parse_module
    monkeypatch.setattr(libcst, "parse_module", lambda *a, **k: calls.append(1) or real(*a, **k))
    warm = list(batch.run(jobs, 1, tmp_path))
    assert calls == []
    assert all(o.cached for o in warm)
    assert [o.diags for o in warm] == [o.diags for o in cold]


def test_cache_key_depends_on_rules_content_and_path(tmp_path):
    cache = batch.Cache(tmp_path, tmp_path / "cache")
    assert cache.key(b"x", Job("a.py", ("TL001",))) != cache.key(b"x", Job("a.py", ("TL002",)))
    assert cache.key(b"x", Job("a.py", CODES)) != cache.key(b"y", Job("a.py", CODES))
    # what an import means depends on the importing file's folder (tests/test_cache.py)
    assert cache.key(b"x", Job("a/m.py", CODES)) != cache.key(b"x", Job("b/m.py", CODES))
    assert cache.key(b"x", Job("a/m.py", CODES)) == cache.key(b"x", Job("a/m.py", CODES))


def test_per_file_time_limit(tmp_path, run_cli):
    body = "".join(
        f"for x{i} in loader:\n    loss{i} = crit(model(x{i}))\n    total = total + loss{i}\n    total.backward()\n"
        for i in range(400)
    )
    (tmp_path / "huge.py").write_text("total = 0\n" + body)
    r = run_cli("-q", "--no-cache", "--file-timeout", "0.01", "huge.py", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, "huge.py:1:1: TL904 checking took longer than 0.01s; file not checked\n"), r.stderr


def slow_to_parse(lines: int) -> str:
    """A training loop, then `lines` lines of brackets nested 190 deep: libcst's native parser takes time quadratic
    in the depth on each (about 0.1 s a line), in one call that no signal interrupts."""
    deep = "x = " + "([" * 95 + "1" + "])" * 95 + "\n"
    return BUGGY + deep * lines


def test_file_timeout_stops_the_native_parser(tmp_path, run_cli, monkeypatch):
    """A file whose parse the alarm inside the worker cannot interrupt (libcst's native parser) is reported TL904,
    by the command and by batch.run, and its worker is killed (SIGKILL), not waited for until the parse ends."""
    import signal

    from torchlint import workers

    (tmp_path / "slow.py").write_text(slow_to_parse(150))
    r = run_cli("-q", "--isolated", "--no-cache", "--file-timeout", "2", "slow.py", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, "slow.py:1:1: TL904 checking took longer than 2s; file not checked\n"), r.stderr

    stopped = []  # (job still running, exit code) of each worker the pool stops
    stop = workers._Worker.stop

    def recording_stop(worker):
        running = worker.deadline is not None
        stop(worker)
        stopped.append((running, worker.process.exitcode))

    monkeypatch.setattr(workers._Worker, "stop", recording_stop)
    [outcome] = batch.run([Job(str(tmp_path / "slow.py"), CODES, timeout=2)], n_jobs=1)
    assert [(d.code, d.message) for d in outcome.diags] == [("TL904", "checking took longer than 2s; file not checked")]
    assert stopped == [(True, -signal.SIGKILL)]


_CHECK_IN_WORKER = batch._process_in_worker


def _crash_on_crash_py(job):
    if job.path.endswith("crash.py"):
        os._exit(139)  # as a native crash (a stack overflow of libcst's parser: SIGSEGV) ends the worker
    return _CHECK_IN_WORKER(job)


@pytest.mark.skipif(multiprocessing.get_start_method() != "fork", reason="the workers run the patched job by fork")
def test_a_crash_of_the_native_parser_is_that_files_error(tmp_path, monkeypatch):
    """A worker that crashes on a file (as a stack overflow in libcst's native parser does: SIGSEGV) is that file's
    TL902, without a BrokenProcessPool traceback, and the other files are checked. (A file nested too deep for
    CPython never reaches libcst: test_nesting_cpython_refuses_is_a_syntax_error.)"""
    (tmp_path / "crash.py").write_text(BUGGY)
    (tmp_path / "train.py").write_text(BUGGY)
    monkeypatch.setattr(batch, "_process_in_worker", _crash_on_crash_py)
    jobs = [Job(str(tmp_path / name), CODES, timeout=60) for name in ("crash.py", "train.py")]
    crashed, checked = batch.run(jobs, 2, None)
    assert [d.message for d in crashed.diags] == [
        "checking crashed (the worker process died (exit code 139)); file not checked; please report it with this file"]
    assert [(d.line, d.code) for d in checked.diags] == [(4, "TL004")]


def test_unreadable_file(tmp_path, monkeypatch):
    """CI runs as root, which reads everything: the failure is simulated at the read itself."""
    p = tmp_path / "secret.py"
    p.write_text(BUGGY)

    def refuse(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(type(p), "read_bytes", refuse)
    (outcome,) = batch.run([Job(str(p), CODES)], 1, None)
    assert [(d.code, d.message) for d in outcome.diags] == [("TL900", "cannot read file: Permission denied")]


def test_symlink_loop_and_not_python(tmp_path, run_cli):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "loop").symlink_to(tmp_path / "a", target_is_directory=True)
    (tmp_path / "a" / "train.py").write_text(BUGGY)
    (tmp_path / "notes.py").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (tmp_path / "prose.py").write_text("This is not Python: for every batch, loss.backward() runs.\n")
    r = run_cli("-q", cwd=tmp_path)
    lines = r.stdout.splitlines()
    assert lines[0].startswith("a/train.py:4:5: TL004")
    assert lines[1].startswith("notes.py:3:1: TL900 file contains null bytes")
    assert lines[2].startswith("prose.py:1:") and " TL901 syntax error" in lines[2]
    assert len(lines) == 3


def test_huge_single_line(tmp_path, run_cli):
    line = "x = [" + ", ".join(str(i) for i in range(50_000)) + "]\n"
    (tmp_path / "big.py").write_text(line + BUGGY)
    r = run_cli("-q", "--no-cache", "big.py", cwd=tmp_path)
    assert r.stdout.startswith("big.py:5:5: TL004")


@pytest.mark.parametrize("jobs", [["--jobs", "1", "--file-timeout", "0"], []], ids=["in-process", "workers"])
def test_nesting_cpython_refuses_is_a_syntax_error(tmp_path, run_cli, jobs):
    """Nesting deeper than CPython accepts was a TL902 "please report" with a worker's traceback, or in-process a
    2,000-line traceback and nothing reported (and 250 brackets, which CPython's tokenizer refuses, were checked as
    if Python ran them). Such a file is a TL901, as any syntax error is."""
    deep = {
        "brackets.py": "x = " + "(" * 250 + "1" + ")" * 250 + "\n",  # CPython's tokenizer stops at 200 levels
        "calls.py": "x = " + "f(" * 1000 + ")" * 1000 + "\n",
        "unary.py": "x = " + "-" * 5000 + "1\n",  # no bracket: the parser's own recursion limit
        "very.py": "x = " + "-" * 100_000 + "1\n",  # crashed libcst's native parser (SIGSEGV)
    }
    for name, line in deep.items():
        (tmp_path / name).write_text(BUGGY + line)
    r = run_cli("-q", "--isolated", "--no-cache", *jobs, *deep, cwd=tmp_path)
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    found = [line.split(" ", 2)[:2] for line in r.stdout.splitlines()]
    assert found == [["brackets.py:5:205:", "TL901"], ["calls.py:5:406:", "TL901"], ["unary.py:1:1:", "TL901"],
                     ["very.py:1:1:", "TL901"]], r.stdout
    assert "very.py:1:1: TL901 syntax error: nested too deeply for Python (" in r.stdout
    assert r.returncode == 1
