"""A fixed file written back where the user's own tools would write it (`--fix`, `--add-noqa`, `--fix --verify`).

- Never over an edit saved since torchlint read the file (an editor, during a minutes-long `--fix --verify`): the
  file must hold the bytes that were fixed, or it is not written.
- A symlink is written through to its target, and stays a link.
- Atomically (a temporary file beside it, renamed over it) when the rename keeps everything the file had: its
  mode, owner and extended attributes. A file with other hard links, or whose owner or attributes the temporary
  file cannot take, is overwritten in place instead, as editors do: the same inode keeps all of them.
- A read-only file (no write permission bit) is refused, as an editor refuses it without `:w!`.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class NotWritten(Exception):
    """A file torchlint decided not to write; the message names it and says why (exit code 2)."""


def write_back(path: Path, read: bytes, text: str, encoding: str) -> None:
    """Write `text` to `path`, which held `read` when it was read; NotWritten when it cannot be done safely."""
    target = Path(os.path.realpath(path))
    data = text.encode(encoding)
    try:
        info = os.stat(target)
        if not info.st_mode & 0o222 or not os.access(target, os.W_OK):
            # root may write any file: the permission bits say what the owner meant
            raise NotWritten(f"{path}: read-only; not written")
        _check_unchanged(path, target, read)
        if info.st_nlink > 1 or not _replace(path, target, read, data, info):
            _overwrite(target, data)
    except FileNotFoundError:
        raise NotWritten(f"{path}: deleted since torchlint read it; not written") from None
    except OSError as exc:
        raise NotWritten(f"{path}: cannot write: {exc.strerror or exc}") from None


def _check_unchanged(path: Path, target: Path, read: bytes) -> None:
    if target.read_bytes() != read:
        raise NotWritten(f"{path}: changed since torchlint read it; not written (run the command again)")


def _replace(path: Path, target: Path, read: bytes, data: bytes, info: os.stat_result) -> bool:
    """Rename a complete copy over `target`; False (nothing changed) when the copy cannot take the file's owner or
    extended attributes, or cannot be created beside it."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".torchlint", dir=target.parent)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.chmod(tmp, stat.S_IMODE(info.st_mode))
            if not _same_owner(fh.fileno(), info) or not _copy_xattrs(target, fh.fileno()):
                os.unlink(tmp)
                return False
            os.fsync(fh.fileno())
        _check_unchanged(path, target, read)  # again, just before the rename: the window left is a few calls
        os.replace(tmp, target)
        return True
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _same_owner(fd: int, info: os.stat_result) -> bool:
    made = os.fstat(fd)
    if (made.st_uid, made.st_gid) == (info.st_uid, info.st_gid) or not hasattr(os, "fchown"):
        return True  # the same, or a system without POSIX owners (Windows)
    try:
        os.fchown(fd, info.st_uid, info.st_gid)
    except OSError:
        return False
    return True


def _copy_xattrs(source: Path, fd: int) -> bool:
    if not hasattr(os, "listxattr"):
        return True  # not Linux: no extended attributes through os to carry
    try:
        names = os.listxattr(source)
    except OSError:
        return True  # the file system has none
    try:
        for name in names:
            os.setxattr(fd, name, os.getxattr(source, name))
    except OSError:
        return False
    return True


def _overwrite(target: Path, data: bytes) -> None:
    with open(target, "r+b") as fh:
        fh.write(data)
        fh.truncate()
        fh.flush()
        os.fsync(fh.fileno())
