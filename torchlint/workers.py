"""Worker processes with a hard time limit per job: a worker still busy at its job's deadline is killed, and a fresh
one takes the next job.

An alarm signal inside the worker (what `--file-timeout` first relied on) only interrupts Python code: libcst's
native parser runs for as long as it runs, so only the parent's clock can end it. The command's jobs run through
`Pool.map` (results in input order); the language server's through `Pool.call`, from several threads at once.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any, Callable, Iterable, Iterator, Sequence

from torchlint.syspath import trusted


@dataclass(frozen=True)
class Failed:
    """A job that gave no result: its worker was killed at the deadline (`timed_out`), or died (a crash of native
    code, the system's out-of-memory killer)."""

    timed_out: bool
    detail: str


def _serve(conn, initializer: Callable | None, initargs: tuple, owner: int | None = None,
           kernel: bool = False) -> None:
    """A worker: run each (function, argument) received, send back (ok, result or exception), until the parent
    closes its end or dies (`owner`: the pid of the process it was started for, when that is its parent; `kernel`:
    whether the kernel may end it with the thread that started it)."""
    _end_with_parent(owner, kernel)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops the workers itself
    from torchlint.source.cstfast import enable

    enable()  # this process is torchlint's own: libcst's faster constructors and read-only parses are safe here
    if initializer is not None:
        initializer(*initargs)
    while True:
        try:
            func, arg = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone or done
        try:
            reply = (True, func(arg))
        except Exception as exc:  # the parent raises it, as a pool's map would
            reply = (False, exc)
        try:
            conn.send(reply)
        except OSError:
            return


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _end_with_parent(owner: int | None, kernel: bool) -> None:
    """Ends this worker when its parent dies. The pipe alone cannot tell: after `kill -9` of the command a forked
    worker still holds its parent's end of its own pipe and of its siblings' (fork copies them), so no EOF ever
    comes, and a worker inside libcst's parser reads nothing. On Linux, when it was started from a thread that
    lives as long as its process (a main thread: the command's, the language server's fork server), the kernel
    kills it with that thread (PR_SET_PDEATHSIG); everywhere a thread watches for the parent to change (once the
    parser lets it run)."""
    parent = os.getppid()
    if owner is not None and parent != owner:
        os._exit(1)  # it died before this worker got here
    if owner is None:
        _release_fork_server()
    if kernel and sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
        if os.getppid() != parent:
            os._exit(1)  # it died before the kernel was told
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="parent-watch").start()


def _release_fork_server() -> None:
    """A fork server's worker is handed the server's "alive" pipe (to start processes through it, which it never
    does); while any worker holds it, the fork server outlives the process that started it, and so do the workers,
    its children. Closed, the server ends with that process, and its workers with it."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if server is not None and fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
        server._forkserver_alive_fd = None


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


_STARTING = threading.Lock()


@contextmanager
def _outside_workspace(method: str) -> Iterator[None]:
    """While a worker starts, no import can reach the current directory (the repository being checked,
    torchlint.syspath): fork copies this `sys.path`, spawn and forkserver hand it to the new process once it runs
    our code, and PYTHONSAFEPATH keeps their new interpreter (and multiprocessing's resource tracker) from putting
    '' first before that (Python 3.11+). Both are put back: the user's own scripts, which --verify runs, see
    what they would see."""
    with _STARTING:
        path, safe = list(sys.path), os.environ.get("PYTHONSAFEPATH")
        sys.path[:] = trusted(sys.path)
        if method != "fork":
            os.environ["PYTHONSAFEPATH"] = "1"
        try:
            yield
        finally:
            sys.path[:] = path
            if safe is None:
                os.environ.pop("PYTHONSAFEPATH", None)
            else:
                os.environ["PYTHONSAFEPATH"] = safe


class _Worker:
    def __init__(self, context, initializer: Callable | None, initargs: tuple) -> None:
        self.conn, theirs = context.Pipe()
        method = context.get_start_method()
        owner = None if method == "forkserver" else os.getpid()  # a fork server's workers are its children
        kernel = method == "forkserver" or threading.current_thread() is threading.main_thread()
        self.process = context.Process(target=_serve, args=(theirs, initializer, initargs, owner, kernel),
                                       daemon=True)
        with _outside_workspace(method):
            self.process.start()
        theirs.close()
        self.index = -1  # the job it runs (Pool.map), -1 when idle
        self.deadline: float | None = None

    def send(self, func: Callable, arg: Any, timeout: float) -> None:
        self.conn.send((func, arg))
        self.deadline = time.monotonic() + timeout if timeout > 0 else None

    def receive(self) -> Any:
        """The job's result, or Failed when the worker died instead of answering."""
        try:
            ok, value = self.conn.recv()
        except (EOFError, OSError):
            self.process.join(1)
            return Failed(False, f"the worker process died (exit code {self.process.exitcode})")
        self.deadline = None
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        """Killed, not asked: it may be inside native code that reads no message."""
        self.conn.close()
        if self.process.is_alive():
            self.process.kill()
        self.process.join()


CANCEL_POLL = 0.02  # seconds between two looks at a call's cancel event


def _answered(conn, timeout: float, cancel: threading.Event | None) -> bool | None:
    """Whether the worker answered within `timeout` seconds (0: none); None when `cancel` was set first."""
    if cancel is None:
        return conn.poll(timeout if timeout > 0 else None)
    deadline = time.monotonic() + timeout if timeout > 0 else None
    while not cancel.is_set():
        left = CANCEL_POLL if deadline is None else min(CANCEL_POLL, deadline - time.monotonic())
        if conn.poll(max(0.0, left)):
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
    return None


class Pool:
    """At most `size` worker processes, started when first needed, each running `initializer(*initargs)` first."""

    def __init__(self, size: int, initializer: Callable | None = None, initargs: tuple = (),
                 start_method: str | None = None, preload: Sequence[str] = ()) -> None:
        """`start_method`: multiprocessing's (None: $TORCHLINT_START_METHOD, else its default); with "forkserver",
        the modules in `preload` are imported once by the server that forks the workers."""
        self.size = max(1, size)
        self._context = multiprocessing.get_context(start_method or os.environ.get("TORCHLINT_START_METHOD") or None)
        if start_method == "forkserver" and preload:
            self._context.set_forkserver_preload(list(preload))
        self._init = (initializer, initargs)
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._lock = threading.Condition()

    def _new(self) -> _Worker:
        return _Worker(self._context, *self._init)

    def map(self, func: Callable, args: Sequence, timeouts: Iterable[float]) -> Iterator[Any]:
        """func(arg) for each arg, in order; a job that runs past its timeout (seconds, 0: none) or whose worker
        dies gives a Failed instead of its result."""
        pending = list(zip(range(len(args)), args, timeouts))
        pending.reverse()
        done: dict[int, Any] = {}
        running: dict[Any, _Worker] = {}  # connection -> worker
        following = 0
        try:
            while following < len(args):
                while pending and len(running) < self.size:
                    index, arg, timeout = pending.pop()
                    worker = self._idle.pop() if self._idle else self._new()
                    worker.index = index
                    worker.send(func, arg, timeout)
                    running[worker.conn] = worker
                deadlines = [w.deadline for w in running.values() if w.deadline is not None]
                left = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
                for conn in wait(list(running), left):
                    worker = running.pop(conn)
                    done[worker.index] = worker.receive()
                    if isinstance(done[worker.index], Failed):
                        worker.stop()
                    else:
                        self._idle.append(worker)
                now = time.monotonic()
                for conn, worker in list(running.items()):
                    if worker.deadline is not None and worker.deadline <= now:
                        del running[conn]
                        worker.stop()
                        done[worker.index] = Failed(True, "killed at its time limit")
                while following in done:
                    yield done.pop(following)
                    following += 1
        finally:
            for worker in running.values():
                worker.stop()  # interrupted (Ctrl-C, an exception): their jobs are abandoned

    def call(self, func: Callable, arg: Any, timeout: float, cancel: threading.Event | None = None) -> Any:
        """func(arg) in a worker, from any thread (a call waits while `size` others run); Failed when it runs past
        `timeout` seconds (0: none) or its worker dies, or when `cancel` is set first (its worker is killed: the
        language server's check of a text a newer edit replaced holds no worker)."""
        with self._lock:
            while not self._idle and len(self._busy) >= self.size:
                if cancel is not None and cancel.is_set():
                    return Failed(False, "cancelled")
                self._lock.wait(None if cancel is None else CANCEL_POLL)
            worker = self._idle.pop() if self._idle else None
            if worker is None:
                worker = self._new()
            self._busy.add(worker)
        alive = False
        try:
            worker.send(func, arg, timeout)
            answered = _answered(worker.conn, timeout, cancel)
            if answered is None:
                return Failed(False, "cancelled")
            if not answered:
                return Failed(True, "killed at its time limit")
            try:
                result = worker.receive()
            except Exception:
                alive = True  # the job failed, not its worker
                raise
            alive = not isinstance(result, Failed)
            return result
        finally:
            if not alive:
                worker.stop()
            with self._lock:
                self._busy.discard(worker)
                if alive:
                    self._idle.append(worker)
                self._lock.notify()

    def close(self) -> None:
        with self._lock:
            workers, self._idle = self._idle, []
        for worker in workers:
            worker.stop()

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
