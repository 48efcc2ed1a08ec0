"""Worker processes with a hard time limit per job (torchlint.workers): results in order, a job past its limit or
whose worker dies is a Failed and the others go on, calls from several threads run side by side."""

from __future__ import annotations

import os
import threading
import time

import pytest

from torchlint.workers import Failed, Pool


def job(arg):
    kind, value = arg
    if kind == "sleep":
        time.sleep(value)
    elif kind == "die":
        os._exit(3)
    elif kind == "raise":
        raise ValueError(value)
    elif kind == "pid-sleep":  # says where it runs, then works for a minute
        with open(value, "w") as fh:
            fh.write(str(os.getpid()))
        time.sleep(60)
    return value


def test_map_keeps_order_and_kills_a_job_at_its_limit():
    args = [("sleep", 0.3), ("sleep", 30), ("value", "c"), ("die", 0), ("value", "e")]
    with Pool(2) as pool:
        results = list(pool.map(job, args, [5, 1, 5, 5, 5]))
    assert results[0] == 0.3 and results[2] == "c" and results[4] == "e"
    assert results[1] == Failed(True, "killed at its time limit")
    assert results[3] == Failed(False, "the worker process died (exit code 3)")


def test_map_raises_what_the_job_raised():
    with Pool(1) as pool, pytest.raises(ValueError, match="bad"):
        list(pool.map(job, [("raise", "bad")], [5]))


def test_calls_from_threads_run_side_by_side_and_a_stuck_one_is_killed():
    results: dict[int, object] = {}
    finished: list[int] = []  # the calls, in the order they returned
    with Pool(2) as pool:

        def call(i, arg, limit):
            results[i] = pool.call(job, arg, limit)
            finished.append(i)

        threads = [threading.Thread(target=call, args=(0, ("sleep", 60), 1.0)),
                   threading.Thread(target=call, args=(1, ("sleep", 0.5), 5))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == {0: Failed(True, "killed at its time limit"), 1: 0.5}
        assert finished == [1, 0], finished  # the short call did not wait for the stuck one
        assert pool.call(job, ("value", 7), 5) == 7  # the killed worker was replaced


# -- code of the repository being checked never runs -----------------------------------------------------------
# Modules a repository may hold under the names of modules torchlint and its workers import: each leaves a mark
# when imported, which would mean that opening or checking the repository ran its code.
SHADOWING = ("threading", "random", "os", "json", "pathspec", "libcst")
TRAIN = "for x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"


def shadowed_workspace(root):
    for name in SHADOWING:
        (root / f"{name}.py").write_text(f"open({str(root / (name + '.imported'))!r}, 'w').close()\n")
    (root / "train.py").write_text(TRAIN)
    return root


def imported(root) -> list[str]:
    return sorted(p.name for p in root.glob("*.imported"))


def _cli(root, *args, env=None, module=False):
    import shutil
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "torchlint"] if module else [shutil.which("torchlint")]
    return subprocess.run([*cmd, "--no-cache", *args], cwd=root, capture_output=True, text=True, timeout=120,
                          env=None if env is None else {**os.environ, **env})


@pytest.mark.parametrize("module", [False, True], ids=["console-script", "python-m"])
def test_the_command_imports_nothing_from_the_checked_repository(tmp_path, module):
    root = shadowed_workspace(tmp_path)
    r = _cli(root, ".", module=module)
    assert imported(root) == []
    assert "train.py:4:5: TL004" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_workers_import_nothing_from_the_checked_repository(tmp_path, method):
    root = shadowed_workspace(tmp_path)
    r = _cli(root, "--jobs", "2", ".", env={"TORCHLINT_START_METHOD": method})
    assert imported(root) == []
    assert "train.py:4:5: TL004" in r.stdout, r.stdout + r.stderr


def test_the_flake8_plugin_imports_nothing_from_the_checked_repository(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = shadowed_workspace(tmp_path)
    flake8 = Path(sys.executable).parent / "flake8"
    r = subprocess.run([str(flake8), "--select", "TL", "-j", "2", "."], cwd=root, capture_output=True, text=True,
                       timeout=120)
    assert imported(root) == []
    assert "./train.py:4:5: TL004" in r.stdout, r.stdout + r.stderr


def test_the_language_server_imports_nothing_from_the_opened_repository(tmp_path):
    import asyncio

    from tests.helpers import start_language_server
    from tests.test_lsp import open_params, stop, until

    root = shadowed_workspace(tmp_path)

    async def go():
        client, received, _ = await start_language_server(root)
        uri = (root / "train.py").as_uri()
        client.text_document_did_open(open_params(uri, TRAIN))
        published = await until(received, uri, 60)
        await stop(client)
        return published

    published = asyncio.run(go())
    assert imported(root) == []
    assert [d.code for d in published.diagnostics] == ["TL004"]


# -- workers end with the process that started them -------------------------------------------------------------
def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    from pathlib import Path

    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _running(pid: int) -> bool:
    from pathlib import Path

    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds the workers in /proc")
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_end_when_the_command_is_killed(tmp_path, method):
    """After `kill -9` of `torchlint --jobs 2` its workers used to live on for ever, each holding the other end of
    a pipe its parent no longer reads; now they end with it."""
    import shutil
    import signal
    import subprocess

    from tests.test_batch import slow_to_parse

    for i in range(4):
        (tmp_path / f"slow{i}.py").write_text(slow_to_parse(100))
    proc = subprocess.Popen([shutil.which("torchlint"), "-q", "--isolated", "--no-cache", "--jobs", "2", "."],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "TORCHLINT_START_METHOD": method})
    workers: list[int] = []
    try:
        for _ in range(600):  # until both workers run (a minute at most)
            workers = [p for p in _children(proc.pid) if _running(p)]
            if len(workers) >= 2:
                break
            time.sleep(0.1)
        assert len(workers) >= 2, workers
        time.sleep(0.5)  # both are inside their files
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for _ in range(600):  # until they end (a minute at most)
            if not any(_running(p) for p in workers):
                break
            time.sleep(0.1)
        assert not [p for p in workers if _running(p)]
    finally:
        proc.kill()
        for p in workers:
            if _running(p):
                os.kill(p, signal.SIGKILL)


def test_a_cancelled_call_stops_its_worker_and_the_next_call_gets_a_fresh_one(tmp_path):
    """The language server's check of a document's older text ran to its end in a worker; a call cancelled (by a
    newer edit) now kills it: a stale check holds no worker."""
    cancel = threading.Event()
    pid_file = tmp_path / "pid"
    results: list[object] = []
    with Pool(1) as pool:
        call = threading.Thread(target=lambda: results.append(pool.call(job, ("pid-sleep", str(pid_file)), 0, cancel)))
        call.start()
        for _ in range(600):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.1)
        pid = int(pid_file.read_text())
        cancel.set()
        call.join()
        assert results == [Failed(False, "cancelled")]
        assert not _running(pid)  # killed, not left to finish
        assert pool.call(job, ("value", 7), 5) == 7


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds the workers in /proc")
def test_the_language_servers_workers_end_when_it_is_killed(tmp_path):
    """The language server's workers are children of a fork server, which each of them held open: after `kill -9`
    of the server, the fork server and a worker inside a long check lived on."""
    import json
    import signal
    import subprocess
    import sys

    from tests.test_batch import slow_to_parse

    server = subprocess.Popen([sys.executable, "-m", "torchlint", "server"], cwd=tmp_path, stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def send(message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        server.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        server.stdin.flush()

    def descendants() -> list[int]:
        found, frontier = [], [server.pid]
        while frontier:
            children = [c for p in frontier for c in _children(p)]
            found += children
            frontier = children
        return [p for p in found if _running(p)]

    started: list[int] = []
    try:
        initialize = {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}
        send({"id": 1, "method": "initialize", "params": initialize})
        send({"method": "initialized", "params": {}})
        send({"method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": (tmp_path / "slow.py").as_uri(), "languageId": "python", "version": 1,
            "text": slow_to_parse(1000)}}})  # minutes of libcst's parser
        for _ in range(600):  # until the fork server and the worker checking slow.py run (a minute at most)
            started = descendants()
            if len(started) >= 3:  # multiprocessing's resource tracker, the fork server, the worker
                break
            time.sleep(0.1)
        assert len(started) >= 3, started
        time.sleep(1.0)  # the worker is inside the check
        server.send_signal(signal.SIGKILL)
        server.wait()
        for _ in range(600):
            if not any(_running(p) for p in started):
                break
            time.sleep(0.1)
        assert not [p for p in started if _running(p)]
    finally:
        server.kill()
        for p in started:
            if _running(p):
                os.kill(p, signal.SIGKILL)
