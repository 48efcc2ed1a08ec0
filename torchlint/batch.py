"""Checking many files: one job per file, in a process pool (`--jobs`), with the result cache (torchlint.cache).

Each job reads, decodes, lints or fixes one file and returns a small `Outcome`; nothing holds more than one
file's tree at a time, so memory does not grow with the corpus. Results come back in input order.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from torchlint.cache import Cache, cache_folder, digest_of, forget
from torchlint.diagnostic import Diagnostic
from torchlint.codes import INTERNAL_ERROR, READ_ERROR, TIMEOUT
from torchlint.source.write_back import NotWritten, write_back


@dataclass(frozen=True)
class Job:
    path: str
    codes: tuple[str, ...]
    mode: str = "check"  # "check", "fix" (write in place), "diff" (return both texts) or "noqa" (--add-noqa)
    unsafe: bool = False
    with_edits: bool = False
    timeout: float = 0.0  # seconds per file; 0: none
    project: str | None = None  # the project root: calls into its other files are followed (torchlint.project)
    data: bytes | None = None  # the file's bytes, read by the command (standard input, a FIFO); never cached


@dataclass(frozen=True)
class Outcome:
    path: str
    diags: tuple[Diagnostic, ...]
    applied: int = 0
    before: str | None = None  # "diff" mode: the text before and after fixing, when they differ
    after: str | None = None
    cached: bool = False
    encoding: str = "utf-8"  # "diff" mode: the file's encoding, for printing the diff as the file's bytes
    error: str | None = None  # "fix" and "noqa" modes: why the fixed text was not written (write_back.NotWritten)


class _Timeout(BaseException):  # not an Exception: the engine must not swallow it
    pass


def _alarm(signum, frame):  # pragma: no cover - runs in a signal handler
    raise _Timeout


def process(job: Job, cache: "Cache | None" = None) -> Outcome:
    try:
        return _process(job, cache)
    except _Timeout:  # the alarm delivered at the edge of the guarded region: the file still took too long
        signal.setitimer(signal.ITIMER_REAL, 0)
        return _timed_out(job)


def _timed_out(job: Job) -> Outcome:
    return Outcome(job.path, (lost(job.path, job.timeout),))


def lost(path: str, timeout: float, crash: str | None = None) -> Diagnostic:
    """What is said of a file whose check ran past `timeout` (TL904), or whose worker died (`crash`: TL902)."""
    if crash is None:
        return Diagnostic(path, 1, 1, 1, 1, TIMEOUT, f"checking took longer than {timeout:g}s; file not checked")
    return Diagnostic(path, 1, 1, 1, 1, INTERNAL_ERROR,
                      f"checking crashed ({crash}); file not checked; please report it with this file")


def _process(job: Job, cache: "Cache | None") -> Outcome:
    path = Path(job.path)
    try:
        data = path.read_bytes() if job.data is None else job.data
    except OSError as exc:
        return Outcome(job.path, (Diagnostic(job.path, 1, 1, 1, 1, READ_ERROR, f"cannot read file: {exc.strerror or exc}"),))
    key, hit = _lookup(job, cache, data)
    if hit is not None:
        return hit
    project = _project(Path(job.project), cache.dir if cache is not None else None) if job.project else None
    timer = job.timeout > 0 and hasattr(signal, "setitimer")
    if timer:
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, job.timeout)
    try:
        outcome = _run(job, path, data, project)
    except _Timeout:
        outcome = _timed_out(job)
    finally:
        if timer:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    if key is not None and cache is not None and not any(d.code == TIMEOUT for d in outcome.diags):
        reads = project.reads.get(path.resolve(), {}) if project is not None else {}
        cache.put(key, outcome.diags, {shown: digest_of(dep) for shown, dep in sorted(reads.items())})
    return outcome


_PROJECTS: dict[tuple[str, str, bool], object] = {}  # per process: a project's files and exports, read once


def cached_project(path: str):
    """For front ends that check one file at a time (flake8, the language server): the file's project, reading
    only the exports the command already cached (`.torchlint_cache/` at the configuration's root, or the current
    directory); None when there is no cache, and the file is checked alone. ConfigError when a configuration on
    the way up cannot be read."""
    from torchlint.config import find_pyproject

    found = find_pyproject(Path(path))
    root = found.parent.resolve() if found is not None else Path.cwd().resolve()
    directory = cache_folder(root)
    return _project(root, directory, cached_only=True) if directory and (directory / "exports").is_dir() else None


def _project(root: Path, cache_dir: Path | None, cached_only: bool = False):
    """The process's one `Project` for this root and cache (its files and exports are read once per run)."""
    from torchlint.project import Project

    key = (str(root), str(cache_dir), cached_only)
    found = _PROJECTS.get(key)
    if found is None:
        found = _PROJECTS[key] = Project(root, cache_dir, cached_only)
    return found


@dataclass(frozen=True)
class Written:
    text: str  # what the file holds now: the new text, or, when it was not written, the text as read
    error: str | None = None  # why the new text was not written (the file changed since it was read ...)


def write_fixed(path: Path, data: bytes, text: str, new_text: str | None, encoding: str) -> Written:
    """The one way a fixed text reaches a file, for every command that rewrites files (--fix, --fix --verify,
    --add-noqa): `data` is what was read from `path` and `text` its decoded text; `new_text` is written back, in
    the file's encoding, only if the file still holds `data` (torchlint.source.write_back)."""
    if new_text is None or new_text == text:
        return Written(text)
    try:
        write_back(path, data, new_text, encoding)
    except NotWritten as exc:
        return Written(text, str(exc))
    return Written(new_text)


def _run(job: Job, path: Path, data: bytes, project=None) -> Outcome:
    # Imported here: a run answered from the cache never loads libcst and the rules.
    from torchlint.engine import SourceError, decode, fix_source, lint_source, select_rules
    from torchlint.notebook import fix_notebook, lint_notebook

    try:
        decoded = decode(data)
    except SourceError as exc:
        return Outcome(job.path, (Diagnostic(job.path, exc.line, 1, exc.line, 1, READ_ERROR, str(exc)),))
    text, rules = decoded.text, select_rules(job.codes)
    notebook = job.path.endswith(".ipynb")
    if job.mode == "noqa":
        return _add_noqa(job, path, data, text, decoded.encoding, rules, notebook, project)
    if job.mode == "check":
        if notebook:
            return Outcome(job.path, tuple(lint_notebook(text, job.path, rules, project)))
        return Outcome(job.path, tuple(lint_source(text, job.path, rules, with_edits=job.with_edits, project=project)))
    if notebook:
        fixed = fix_notebook(text, job.path, rules, job.unsafe, project)
        new_text, diags, applied = fixed.text, tuple(fixed.diags), fixed.applied
    else:
        result = fix_source(text, job.path, rules, unsafe=job.unsafe, project=project)
        new_text, diags, applied = result.text, tuple(result.remaining) + tuple(result.failed), result.applied
    if new_text == text:
        return Outcome(job.path, diags)
    if job.mode == "diff":
        return Outcome(job.path, diags, applied, text, new_text, encoding=decoded.encoding)
    written = write_fixed(path, data, text, new_text, decoded.encoding)
    if written.error is not None:  # none of its fixes reached the file: report what the file as read holds
        found = (lint_notebook(text, job.path, rules, project) if notebook
                 else lint_source(text, job.path, rules, with_edits=job.with_edits, project=project))
        return Outcome(job.path, tuple(found), error=written.error)
    return Outcome(job.path, diags, applied)


def _add_noqa(job: Job, path: Path, data: bytes, text: str, encoding: str, rules, notebook: bool,
              project=None) -> Outcome:
    from torchlint.add_noqa import add_noqa, codes_by_line
    from torchlint.engine import lint_source
    from torchlint.notebook import NotebookError, add_noqa_notebook

    if notebook:
        try:
            new_text, changed = add_noqa_notebook(text, job.path, rules, project)
        except NotebookError as exc:  # findings it cannot accept: never a quiet "Added 0"
            return Outcome(job.path, (), error=f"{job.path}: {exc}")
    else:
        new_text, changed = add_noqa(text, codes_by_line(lint_source(text, job.path, rules, project=project)))
    if changed:
        written = write_fixed(path, data, text, new_text, encoding)
        if written.error is not None:
            return Outcome(job.path, (), error=written.error)
    return Outcome(job.path, (), changed)


_WORKER_CACHE: Cache | None = None


def _fresh() -> None:
    """A run starts from the files as they are now: nothing read by an earlier run of this process is kept."""
    _PROJECTS.clear()
    forget()


def _init_worker(cache: tuple[str, str] | None) -> None:
    global _WORKER_CACHE
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the command's handler (cli): a worker just ends
    _fresh()
    _WORKER_CACHE = Cache(Path(cache[0]), Path(cache[1])) if cache else None


def _process_in_worker(job: Job) -> Outcome:
    return process(job, _WORKER_CACHE)


# A worker still busy this long after its file's time limit is killed: the alarm inside it had its chance (it
# stops Python code, and keeps the worker), but native code such as libcst's parser does not see it.
KILL_AFTER = 0.2


def run(jobs: Sequence[Job], n_jobs: int = 0, cache_root: Path | None = None) -> Iterator[Outcome]:
    """Outcomes in the order of `jobs`. `n_jobs` 0 means one per CPU. Files with a time limit are checked in worker
    processes (torchlint.workers), which are killed at it; without one, one job runs in this process."""
    n = n_jobs or os.cpu_count() or 1
    n = max(1, min(n, len(jobs)))
    _fresh()
    cache = Cache.open(cache_root) if cache_root else None
    if n == 1 and not any(job.timeout > 0 for job in jobs):
        for job in jobs:
            yield process(job, cache)
        return
    # Answers the cache has are read here: a warm run starts no worker at all.
    hits = [_cached(job, cache) for job in jobs] if cache is not None else [None] * len(jobs)
    todo = [job for job, hit in zip(jobs, hits) if hit is None]
    if not todo:
        yield from hits  # type: ignore[misc]  # no None: every job was a hit
        return
    from torchlint.workers import Failed, Pool

    shared = (str(cache.root), str(cache.dir)) if cache is not None else None
    with Pool(max(1, min(n, len(todo))), _init_worker, (shared,)) as pool:
        limits = [job.timeout + KILL_AFTER if job.timeout > 0 else 0 for job in todo]
        results = iter(pool.map(_process_in_worker, todo, limits))
        for job, hit in zip(jobs, hits):
            if hit is not None:
                yield hit
                continue
            result = next(results)
            if isinstance(result, Failed):
                result = Outcome(job.path, (lost(job.path, job.timeout, None if result.timed_out else result.detail),))
            yield result


def _cached(job: Job, cache: "Cache") -> Outcome | None:
    """The cache's answer for a file, or None (not cached, changed, unreadable: the worker will say)."""
    if job.mode != "check" or job.data is not None:
        return None
    try:
        data = Path(job.path).read_bytes()
    except OSError:
        return None
    return _lookup(job, cache, data)[1]


def _lookup(job: Job, cache: "Cache | None", data: bytes) -> tuple[str | None, Outcome | None]:
    """The file's cache key (None when this job is not cached) and the cache's answer for it, if any."""
    key = cache.key(data, job) if cache is not None and job.mode == "check" and job.data is None else None
    hit = cache.get(key, job.path, job.project) if cache is not None and key is not None else None
    return key, (Outcome(job.path, hit, cached=True) if hit is not None else None)
