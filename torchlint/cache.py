"""The result cache (`.torchlint_cache/`): a file's diagnostics, kept with the hashes of the project files its
check looked at (and looked for without finding), and given back only while all of them are as they were.

An entry is keyed by the file's bytes and path, the torchlint version, the rules enabled and the output options:
everything else a check reads is one of its recorded dependencies, so a cached answer is the answer `--no-cache`
gives.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from torchlint import __version__
from torchlint.diagnostic import Diagnostic, Edit, FixInfo

if TYPE_CHECKING:
    from torchlint.batch import Job

CACHE_DIR = ".torchlint_cache"


class Cache:
    """Diagnostics by hash of (file bytes, file path, torchlint version, enabled rules, output options)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.dir = root / CACHE_DIR / __version__
        self._ready = False

    def key(self, data: bytes, job: "Job") -> str:
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
        """The cached diagnostics, unless a project file the result read (its `deps`) has changed since."""
        try:
            entry = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict):
            return None
        for dep, digest in entry.get("deps", {}).items():
            if root is None or digest_of(Path(root) / dep) != digest:
                return None
        return tuple(_diag_from(item, path) for item in entry["diags"])

    def put(self, key: str, diags: Iterable[Diagnostic], deps: dict[str, str | None] | None = None) -> None:
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


def forget() -> None:
    """A new run: the files may have changed since the last one of this process."""
    _DIGESTS.clear()


def digest_of(path: Path) -> str | None:
    """The content hash of a dependency; None when it is not there."""
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
