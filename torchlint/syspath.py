"""`sys.path` without the directory torchlint runs in: the repository being checked is read, never imported.

`python -m torchlint` puts the current directory first on `sys.path`, and a new interpreter started with `-c` (how
multiprocessing starts spawn and forkserver workers) puts '' there: a repository's own `threading.py` or `json.py`
would be imported in place of the standard library's, running its code when torchlint checks it or an editor opens
it (and breaking the check). Only the folder torchlint itself was imported from may stay.

Imports nothing but `os` and `sys` (both loaded before any user code can be found), so `__main__` can call it
before it imports anything else.
"""

from __future__ import annotations

import os
import sys

_OWN = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # what holds the torchlint package


def trusted(paths: list[str]) -> list[str]:
    """`paths` less the entries that name the current directory ('', '.', its path)."""
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:  # the current directory was removed: only '' can still point at it
        return [p for p in paths if p]
    return [p for p in paths if os.path.realpath(p or os.curdir) != here or here == _OWN]


def protect() -> None:
    """This process's `sys.path` without the current directory (from here on, imports cannot reach it)."""
    sys.path[:] = trusted(sys.path)
