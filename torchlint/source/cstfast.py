"""Two of libcst's costs the analysis does not need to pay, each with the public path as its fallback.

- `parse_read_only`: libcst validates every node it constructs (`CSTNode.__post_init__` calls `_validate`), a
  guard meant for trees built by hand; on a tree coming out of its parser it is a sixth of the parse's time
  (libcst's own comment there says as much). A thread-local switch skips it during that one parse, for trees the
  analysis only reads. Every other construction, in every thread (a fix building its nodes, another libcst user
  in the same flake8 process), is validated exactly as before. Fixing parses with `cst.parse_module` as usual.
- `code_of`: the code of one node, generated with a state whose position hook is a plain object rather than a
  generator-based context manager (`contextlib` was a tenth of the analysis's time on the synthetic corpus).
"""

from __future__ import annotations

import threading
from typing import Any

import libcst as cst

try:  # internal to libcst: a libcst that moves it gets the public (slower) code generation
    from libcst._nodes.internal import CodegenState
except ImportError:  # pragma: no cover - depends on the installed libcst
    CodegenState = None  # type: ignore[assignment,misc]

class _Switch(threading.local):
    read_only = False  # a class attribute: each thread starts with validation on


_local = _Switch()
_installed = False
_lock = threading.Lock()


def _install() -> bool:
    """Wrap libcst's `__post_init__` once with the thread-local switch; False where libcst's shape differs."""
    global _installed
    with _lock:
        if _installed:
            return True
        original = cst.CSTNode.__dict__.get("__post_init__")
        if original is None or getattr(original, "__name__", "") != "__post_init__":
            return False

        def __post_init__(self: cst.CSTNode) -> None:
            if not _local.read_only:
                self._validate()

        __post_init__.__wrapped__ = original  # type: ignore[attr-defined]
        cst.CSTNode.__post_init__ = __post_init__  # type: ignore[method-assign]
        _installed = True
        return True


def parse_read_only(text: str) -> cst.Module:
    """`cst.parse_module(text)`, without validating the nodes its parser builds. Raises what it raises."""
    if not _install():
        return cst.parse_module(text)
    _local.read_only = True
    try:
        return cst.parse_module(text)
    finally:
        _local.read_only = False


class _NoMark:
    """The position hook of plain code generation: nothing to record."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


_NO_MARK = _NoMark()

if CodegenState is not None:

    class _PlainState(CodegenState):  # type: ignore[misc,valid-type]
        def record_syntactic_position(self, node, *, start_node=None, end_node=None):  # type: ignore[override]
            return _NO_MARK


_EMPTY = cst.Module(body=[])


def code_of(node: cst.CSTNode) -> str:
    """The code of `node` alone, as `Module.code_for_node` writes it."""
    if CodegenState is None:  # pragma: no cover - depends on the installed libcst
        return _EMPTY.code_for_node(node)
    state = _PlainState(default_indent=_EMPTY.default_indent, default_newline=_EMPTY.default_newline)
    node._codegen(state)
    return "".join(state.tokens)
