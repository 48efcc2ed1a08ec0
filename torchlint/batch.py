"""Checking many files: one job per file, in a process pool (`--jobs`), with a content-hash cache.

Each job reads, decodes, lints or fixes one file and returns a small `Outcome`; nothing holds more than one
file's tree at a time, so memory does not grow with the corpus. Results come back in input order.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from torchlint import __version__
from torchlint.diagnostic import Diagnostic, Edit, FixInfo
from torchlint.codes import INTERNAL_ERROR, READ_ERROR, TIMEOUT

CACHE_DIR = ".torchlint_cache"


@dataclass(frozen=True)
class Job:
    path: str
    codes: tuple[str, ...]
    mode: str = "check"  # "check", "fix" (write in place), "diff" (return both texts) or "noqa" (--add-noqa)
    unsafe: bool = False
    with_edits: bool = False
    timeout: float = 0.0  # seconds per file; 0: none
    project: str | None = None  # the project root: calls into its other files are followed (analysis.project)


@dataclass(frozen=True)
class Outcome:
    path: str
    diags: tuple[Diagnostic, ...]
    applied: int = 0
    before: str | None = None  # "diff" mode: the text before and after fixing, when they differ
    after: str | None = None
    cached: bool = False
    encoding: str = "utf-8"  # "diff" mode: the file's encoding, for printing the diff as the file's bytes


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
        data = path.read_bytes()
    except OSError as exc:
        return Outcome(job.path, (Diagnostic(job.path, 1, 1, 1, 1, READ_ERROR, f"cannot read file: {exc.strerror or exc}"),))
    key = cache.key(data, job) if cache is not None and job.mode == "check" else None
    if key is not None:
        hit = cache.get(key, job.path, job.project)
        if hit is not None:
            return Outcome(job.path, hit, cached=True)
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
        cache.put(key, outcome.diags, {shown: _digest(dep) for shown, dep in sorted(reads.items())})
    return outcome


_PROJECTS: dict[tuple[str, str, bool], object] = {}  # per process: a project's files and exports, read once


def cached_project(path: str):
    """For front ends that check one file at a time (flake8, the language server): the file's project, reading
    only the exports the command already cached (`.torchlint_cache/` at the configuration's root, or the current
    directory); None when there is no cache, and the file is checked alone."""
    from torchlint.config import find_pyproject

    try:
        found = find_pyproject(Path(path))
    except OSError:
        return None
    root = found.parent.resolve() if found is not None else Path.cwd().resolve()
    directory = root / CACHE_DIR / __version__
    return _project(root, directory, cached_only=True) if (directory / "exports").is_dir() else None


def _project(root: Path, cache_dir: Path | None, cached_only: bool = False):
    """The process's one `Project` for this root and cache (its files and exports are read once per run)."""
    from torchlint.analysis.project import Project

    key = (str(root), str(cache_dir), cached_only)
    found = _PROJECTS.get(key)
    if found is None:
        found = _PROJECTS[key] = Project(root, cache_dir, cached_only)
    return found


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
        return _add_noqa(job, path, text, decoded.encoding, rules, notebook, project)
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
    write_atomic(path, new_text, decoded.encoding)
    return Outcome(job.path, diags, applied)


def _add_noqa(job: Job, path: Path, text: str, encoding: str, rules, notebook: bool, project=None) -> Outcome:
    from torchlint.add_noqa import add_noqa, codes_by_line
    from torchlint.engine import lint_source
    from torchlint.notebook import add_noqa_notebook

    if notebook:
        new_text, changed = add_noqa_notebook(text, job.path, rules, project)
    else:
        new_text, changed = add_noqa(text, codes_by_line(lint_source(text, job.path, rules, project=project)))
    if changed:
        write_atomic(path, new_text, encoding)
    return Outcome(job.path, (), changed)


def write_atomic(path: Path, text: str, encoding: str) -> None:
    """Temp file in the same directory, same mode, then rename: a crash never leaves half a file."""
    import tempfile

    data = text.encode(encoding)
    mode = path.stat().st_mode
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".torchlint", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class Cache:
    """Diagnostics by hash of (file bytes, torchlint version, enabled rules, output options)."""

    def __init__(self, root: Path) -> None:
        self.dir = root / CACHE_DIR / __version__
        self._ready = False

    def key(self, data: bytes, job: Job) -> str:
        h = hashlib.blake2b(data, digest_size=20)
        h.update(f"\0{__version__}\0{','.join(job.codes)}\0{job.with_edits}\0{job.project is not None}".encode())
        return h.hexdigest()

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str, path: str, root: str | None = None) -> tuple[Diagnostic, ...] | None:
        """The cached diagnostics, unless a project file the result read (its `deps`) has changed since."""
        try:
            entry = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict):
            return None
        for dep, digest in entry.get("deps", {}).items():
            if root is None or _digest(Path(root) / dep) != digest:
                return None
        return tuple(_diag_from(item, path) for item in entry["diags"])

    def put(self, key: str, diags: Iterable[Diagnostic], deps: dict[str, str] | None = None) -> None:
        try:
            if not self._ready:
                top = self.dir.parent
                top.mkdir(parents=True, exist_ok=True)
                ignore = top / ".gitignore"
                if not ignore.exists():
                    ignore.write_text("# created by torchlint\n*\n", encoding="utf-8")
                self._ready = True
            target = self._path(key)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            entry = {"deps": deps or {}, "diags": [asdict(d) for d in diags]}
            tmp.write_text(json.dumps(entry), encoding="utf-8")
            os.replace(tmp, target)
        except OSError:
            pass  # a read-only tree still gets checked, just not cached


_DIGESTS: dict[Path, str | None] = {}  # per process: a run reads each dependency once


def _digest(path: Path) -> str | None:
    found = _DIGESTS.get(path, "")
    if found == "":
        from torchlint.analysis.project import content_hash

        try:
            found = content_hash(path.read_bytes())
        except OSError:
            found = None
        _DIGESTS[path] = found
    return found


def _diag_from(item: dict, path: str) -> Diagnostic:
    fix = item.get("fix")
    info = None
    if fix is not None:
        info = FixInfo(fix["applicability"], fix["message"], tuple(Edit(**e) for e in fix["edits"]))
    return Diagnostic(path, item["line"], item["column"], item["end_line"], item["end_column"], item["code"],
                      item["message"], info, item.get("cell"), item.get("runtime"))


_WORKER_CACHE: Cache | None = None


def _fresh() -> None:
    """A run starts from the files as they are now: nothing read by an earlier run of this process is kept."""
    _PROJECTS.clear()
    _DIGESTS.clear()


def _init_worker(cache_root: str | None) -> None:
    global _WORKER_CACHE
    _fresh()
    _WORKER_CACHE = Cache(Path(cache_root)) if cache_root else None


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
    if n == 1 and not any(job.timeout > 0 for job in jobs):
        cache = Cache(cache_root) if cache_root else None
        for job in jobs:
            yield process(job, cache)
        return
    from torchlint.workers import Failed, Pool

    with Pool(n, _init_worker, (str(cache_root) if cache_root else None,)) as pool:
        limits = [job.timeout + KILL_AFTER if job.timeout > 0 else 0 for job in jobs]
        for job, result in zip(jobs, pool.map(_process_in_worker, jobs, limits)):
            if isinstance(result, Failed):
                result = Outcome(job.path, (lost(job.path, job.timeout, None if result.timed_out else result.detail),))
            yield result
