"""Reading a file that torchlint did not pick itself (an import's target, a dependency a cache entry names): only
a regular file is read. Opening a FIFO blocks until someone writes to it, and a device may never end."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

# Opening a FIFO to read it without O_NONBLOCK waits for a writer; with it, the open returns and fstat says what
# it is. A terminal must not become the process's controlling one.
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)


def read_regular(path: str | Path) -> bytes:
    """The bytes of a regular file (through symlinks); OSError for anything else, as for a missing file."""
    fd = os.open(path, _FLAGS)
    with open(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return fh.read()
