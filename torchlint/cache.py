"""The result cache (`.torchlint_cache/`): a file's diagnostics, kept with the hashes of the project files its
check looked at (and looked for without finding), and given back only while all of them are as they were.

An entry is keyed by the file's bytes and path, the torchlint version, the rules enabled and the output options:
everything else a check reads is one of its recorded dependencies, so a cached answer is the answer `--no-cache`
gives.

Only entries this user wrote on this machine are read. The cache lives in a folder named by a secret of the user
(`~/.cache/torchlint/cache-key`, made on first use, readable by them alone): a `.torchlint_cache/` that came with
a repository, or that anyone else wrote, is never found, so it cannot forge an "All checks passed". Without a key
(no writable home, a key others can read), nothing is cached. The folder is never reached through a symlink.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from dataclasses import asdict
from pathlib import Path
from typing import Iterable, Mapping, Protocol, Sequence

from torchlint import __version__
from torchlint.diagnostic import Diagnostic, Edit, FixInfo
from torchlint.source.safe_read import read_regular


class Job(Protocol):
    """What a cache key is made of: a file to check and how (batch.Job, a frozen dataclass, is one)."""

    @property
    def path(self) -> str: ...
    @property
    def codes(self) -> Sequence[str]: ...
    @property
    def with_edits(self) -> bool: ...
    @property
    def project(self) -> str | None: ...


CACHE_DIR = ".torchlint_cache"


def cache_folder(root: Path) -> Path | None:
    """This user's cache folder of the project at `root`, or None when there is none to trust."""
    top = root / CACHE_DIR
    if os.path.islink(top) or os.path.islink(top / __version__):
        return None  # a link the repository shipped could point anywhere: never written or read through
    key = machine_key()
    if key is None:
        return None
    return top / __version__ / hmac.new(key, b"torchlint cache folder", hashlib.sha256).hexdigest()[:32]


class Cache:
    """Diagnostics by hash of (file bytes, file path, torchlint version, enabled rules, output options), in
    `directory` (`cache_folder`; its exports too)."""

    def __init__(self, root: Path, directory: Path) -> None:
        self.root = root.resolve()
        self.dir = directory
        self._ready = False

    @classmethod
    def open(cls, root: Path) -> "Cache | None":
        """The cache of the project at `root`; None when nothing may be cached there."""
        directory = cache_folder(root)
        return cls(root, directory) if directory is not None else None

    def key(self, data: bytes, job: Job) -> str:
        # The path counts: what an import resolves to depends on the importing file's folder, and a notebook is
        # read differently from a script with the same bytes.
        real = os.path.realpath(job.path)
        where = os.path.relpath(real, self.root) if real.startswith(str(self.root).rstrip(os.sep) + os.sep) else real
        h = hashlib.blake2b(data, digest_size=20)
        h.update(f"\0{__version__}\0{','.join(job.codes)}\0{job.with_edits}\0{job.project is not None}"
                 f"\0{where}\0{job.path}".encode("utf-8", "surrogateescape"))
        return h.hexdigest()

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str, path: str, root: str | None = None) -> tuple[Diagnostic, ...] | None:
        """The cached diagnostics, unless a project file the result read (its `deps`) has changed since. An entry
        that is not what `put` writes (cut short, of another version, edited) is a miss, never an error."""
        try:
            entry = json.loads(read_regular(self._path(key)).decode("utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or not isinstance(entry.get("deps"), dict):
            return None
        for dep, digest in entry["deps"].items():
            if root is None:
                return None
            found = _DEPS.get((root, dep), _UNSEEN)
            if found is _UNSEEN:
                found = _DEPS[root, dep] = digest_of(os.path.join(root, dep)) if _inside(dep) else False
            if found is False or found != digest:
                return None
        diags = entry.get("diags")
        if not isinstance(diags, list):
            return None
        try:
            return tuple(_diag_from(item, path) for item in diags)
        except (KeyError, TypeError, ValueError):
            return None

    def put(self, key: str, diags: Iterable[Diagnostic], deps: dict[str, str | None] | None = None) -> None:
        try:
            if not self._ready:
                top = self.dir.parent.parent
                self.dir.mkdir(parents=True, exist_ok=True)
                try:  # O_EXCL: never through a link that is there already
                    fd = os.open(top / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                except FileExistsError:
                    pass
                else:
                    with open(fd, "w", encoding="utf-8") as fh:
                        fh.write("# created by torchlint\n*\n")
                self._ready = True
            target = self._path(key)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            entry = {"deps": deps or {}, "diags": [asdict(d) for d in diags]}
            tmp.write_text(json.dumps(entry), encoding="utf-8")
            os.replace(tmp, target)
        except OSError:
            pass  # a read-only tree still gets checked, just not cached


_KEYS: dict[str, bytes | None] = {}  # per process, by the key file's path


def machine_key() -> bytes | None:
    """This user's secret on this machine: `$XDG_CACHE_HOME/torchlint/cache-key` (default `~/.cache`), made on
    first use; None when it cannot be made or is not private to the user."""
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(home):
        return None  # no home to keep it in
    path = os.path.join(home, "torchlint", "cache-key")
    if path not in _KEYS:
        _KEYS[path] = _read_key(path) or _make_key(path)
    return _KEYS[path]


def _make_key(path: str) -> bytes | None:
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_key(path)  # made by a process running at the same time (or one we may not use)
    except OSError:
        return None
    with open(fd, "wb") as fh:
        fh.write(secrets.token_hex(32).encode() + b"\n")
    return _read_key(path)


def _read_key(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with open(fd, "rb") as fh:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        if os.name == "posix" and (info.st_mode & 0o077 or info.st_uid != os.getuid()):
            return None  # another user could read it, and forge entries under it
        key = fh.read(256).strip()
    return key if len(key) >= 32 else None


_DIGESTS: dict[str, str | None] = {}  # per process: a run reads each dependency once
_LISTINGS: dict[str, frozenset[str]] = {}  # per process: folders' listings
# per process, as entries name them: (project root, dependency) -> digest_of, or False when it is not a path inside
# the project. Entries share most of their dependencies (the files `import torch` was looked for at...).
_DEPS: dict[tuple[str, str], str | None | bool] = {}
_UNSEEN = object()


def forget() -> None:
    """A new run: the files (and the key) may have changed since the last one of this process."""
    _DIGESTS.clear()
    _LISTINGS.clear()
    _DEPS.clear()
    _KEYS.clear()


def digest_of(path: str | Path) -> str | None:
    """The content hash of a dependency; None when its folder does not list it, `!errno` when it cannot be read
    as a file (a folder, a FIFO, a dangling symlink or a loop, no permission): each is a state a change away from
    the others. Absence is read from the folder's listing, as imports are resolved (torchlint.project): most
    dependencies are the files an import was looked for at, and one listing answers for all of a folder's."""
    path = str(path)
    found = _DIGESTS.get(path, "")
    if found == "":
        from torchlint.source.digest import content_hash

        folder, name = os.path.split(path)
        if name not in _listing(folder):
            found = None
        else:
            try:
                found = content_hash(read_regular(path))
            except OSError as exc:
                found = f"!{exc.errno}"
        _DIGESTS[path] = found
    return found


def _listing(folder: str) -> frozenset[str]:
    names = _LISTINGS.get(folder)
    if names is None:
        try:
            names = frozenset(os.listdir(folder))
        except OSError:
            names = frozenset()
        _LISTINGS[folder] = names
    return names


def _inside(dep: object) -> bool:
    """Is a dependency an entry names a path inside the project, as `put` writes them (relative, `/`, no `..`)?"""
    if not isinstance(dep, str) or not dep or "\0" in dep or os.path.isabs(dep) or os.path.splitdrive(dep)[0]:
        return False
    parts = dep.split("/") if os.sep == "/" else dep.replace(os.sep, "/").split("/")
    return all(part not in ("", ".", "..") for part in parts)


def _diag_from(item: object, path: str) -> Diagnostic:
    """A diagnostic from its entry in the cache; TypeError when a field is missing or of the wrong type."""
    if not isinstance(item, dict):
        raise TypeError("not a diagnostic")
    fix = item.get("fix")
    info = None
    if fix is not None:
        if not isinstance(fix, dict) or not isinstance(fix["edits"], list):
            raise TypeError("not a fix")
        edits = tuple(Edit(**_typed(e, _EDIT)) for e in fix["edits"])
        info = FixInfo(**_typed({"applicability": fix["applicability"], "message": fix["message"]}, _FIX), edits=edits)
    fields = _typed({name: item[name] for name in _DIAG}, _DIAG)
    cell, runtime = item.get("cell"), item.get("runtime")
    if not (cell is None or _is_int(cell)) or not isinstance(runtime, (str, type(None))):
        raise TypeError("not a diagnostic")
    return Diagnostic(path, **fields, fix=info, cell=cell, runtime=runtime)


_DIAG = {"line": int, "column": int, "end_line": int, "end_column": int, "code": str, "message": str}
_EDIT = {"line": int, "column": int, "end_line": int, "end_column": int, "content": str}
_FIX = {"applicability": str, "message": str}


def _typed(raw: object, fields: Mapping[str, type]) -> dict:
    """`raw`'s `fields`, each of its type (a JSON `true` is not a line number)."""
    if not isinstance(raw, dict) or set(raw) != set(fields):
        raise TypeError("wrong fields")
    for name, kind in fields.items():
        if not (_is_int(raw[name]) if kind is int else isinstance(raw[name], kind)):
            raise TypeError(f"{name}: not {kind.__name__}")
    return raw


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
