"""Three of libcst's costs the analysis does not need to pay, each with the public path as its fallback.

The first two change libcst's classes for the whole process, so they are switched on only where torchlint owns the
process: `enable()`, called by torchlint's worker processes at their start (torchlint.workers). Importing torchlint,
or running it inside another program (flake8, the language server's own process, a user's script calling
`torchlint.lint_source`), leaves libcst exactly as it is; there `parse_read_only` is `cst.parse_module`.

- `parse_read_only`: libcst validates every node it constructs (`CSTNode.__post_init__` calls `_validate`), a
  guard meant for trees built by hand; on a tree coming out of its parser it is a sixth of the parse's time
  (libcst's own comment there says as much). A thread-local switch skips it during that one parse, for trees the
  analysis only reads. Every other construction, in every thread (a fix building its nodes, another libcst user
  in the same flake8 process), is validated exactly as before. Fixing parses with `cst.parse_module` as usual.
- Constructors: a frozen dataclass's generated `__init__` stores each field through `object.__setattr__`, which
  looks the field up on the type at every store; libcst's parser builds a million nodes for 300 training scripts.
  Each node class whose shape is the plain one (every field a slot, set in order, then `__post_init__`) gets an
  `__init__` that stores through the slots' own descriptors: the same fields, the same defaults and default
  factories, the same `__post_init__` (validation and all), a third faster. An instance of a subclass that inherits
  it (whose slots could shadow the class's) is built by the original. Applied to every construction, since it
  changes nothing but the speed.
- `code_of`: the code of one node, generated with a state whose position hook is a plain object rather than a
  generator-based context manager (`contextlib` was a tenth of the analysis's time on the synthetic corpus).
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
from typing import Any, Callable

import libcst as cst

try:  # internal to libcst: a libcst that moves it gets the public (slower) code generation
    from libcst._nodes.internal import CodegenState
except ImportError:  # pragma: no cover - depends on the installed libcst
    CodegenState = None  # type: ignore[assignment,misc]  # a class where libcst has it; the fallback is tested on None


class _Switch(threading.local):
    read_only = False  # a class attribute: each thread starts with validation on


_local = _Switch()
_installed = False
_lock = threading.Lock()


def enable() -> bool:
    """Switch the speed-ups on in this process, once; False where libcst's shape differs (nothing then changes)."""
    return _install()


def _install() -> bool:
    """Wrap libcst's `__post_init__` once with the thread-local switch, and give the node classes their faster
    constructors; False where libcst's shape differs."""
    global _installed
    with _lock:
        if _installed:
            return True
        original = cst.CSTNode.__dict__.get("__post_init__")
        if original is None or getattr(original, "__name__", "") != "__post_init__":
            return False
        _post_init.__wrapped__ = original  # type: ignore[attr-defined]  # functools' convention, set by hand
        cst.CSTNode.__post_init__ = _post_init  # type: ignore[method-assign]  # deliberate: patched at runtime
        for cls in _node_classes():
            fast = _slot_init(cls)
            if fast is not None:
                cls.__init__ = fast  # type: ignore[method-assign]  # deliberate: the node classes are patched at runtime
        _installed = True
        return True


def _post_init(self: cst.CSTNode) -> None:
    """CSTNode's `__post_init__` with the thread-local switch."""
    if not _local.read_only:
        self._validate()


def _node_classes() -> list[type[cst.CSTNode]]:
    """Every subclass of CSTNode (libcst's slotted classes, and the plain dataclasses they were made from)."""
    found: dict[type[cst.CSTNode], None] = {}
    todo = [cst.CSTNode]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found[sub] = None
                todo.append(sub)
    return list(found)


def _slot_init(cls: type[cst.CSTNode]) -> Callable | None:
    """An `__init__` equal to the one dataclasses generated for `cls`, storing through the slot descriptors; None
    when `cls` is not of the plain shape (then it keeps its own)."""
    original: Any = cls.__dict__.get("__init__")
    code = getattr(original, "__code__", None)
    if code is None or code.co_filename != "<string>" or not dataclasses.is_dataclass(cls):
        return None  # not an __init__ that dataclasses generated
    fields = dataclasses.fields(cls)
    params = list(inspect.signature(original).parameters.values())[1:]
    names = [f.name for f in fields]
    if [p.name for p in params] != names or any(
        not f.init or f.kw_only is True or p.kind is not p.POSITIONAL_OR_KEYWORD or n.startswith("_tl_") or n == "self"
        for f, p, n in zip(fields, params, names)
    ):
        return None
    # Parameters keep the fields' names: libcst's parser passes every field by keyword.
    # Only `_tl_` names besides the fields: a field may be called `type` (ExceptHandler's is).
    scope: dict[str, Any] = {"_tl_cls": cls, "_tl_original": original, "_tl_type": type, "_tl_local": _local}
    head, body = [], []
    for i, (f, p) in enumerate(zip(fields, params)):
        slot: Any = next((k.__dict__[f.name] for k in cls.__mro__ if f.name in k.__dict__), None)
        if type(slot).__name__ != "member_descriptor":
            return None
        scope[f"_tl_set{i}"] = slot.__set__
        if f.default_factory is not dataclasses.MISSING:  # the signature's default is dataclasses' marker
            scope[f"_tl_marker{i}"], scope[f"_tl_make{i}"] = p.default, f.default_factory
            head.append(f"{f.name}=_tl_marker{i}")
            body.append(f"    if {f.name} is _tl_marker{i}: {f.name} = _tl_make{i}()")
        elif f.default is not dataclasses.MISSING:
            if p.default is not f.default:
                return None
            scope[f"_tl_default{i}"] = f.default
            head.append(f"{f.name}=_tl_default{i}")
        else:
            head.append(f.name)
        body.append(f"    _tl_set{i}(self, {f.name})")
    source = "\n".join([
        f"def __init__({', '.join(['self', *head])}):",
        # a subclass inheriting this __init__ may shadow the slots: the original serves it
        f"    if _tl_type(self) is not _tl_cls: return _tl_original({', '.join(['self', *names])})",
        *body,
        # CSTNode's own `__post_init__` (`_post_init`) written out, where the class keeps it: a call less per node
        "    if not _tl_local.read_only: self._validate()" if cls.__post_init__ is _post_init else "    self.__post_init__()",
    ]) + "\n"
    exec(source, scope)  # noqa: S102 - built from the dataclass's own field names
    fast = scope["__init__"]
    fast.__wrapped__ = original
    fast.__qualname__ = original.__qualname__
    return fast


def parse_read_only(text: str) -> cst.Module:
    """`cst.parse_module(text)`, without validating the nodes its parser builds. Raises what it raises."""
    if not _installed:
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

    class _PlainState(CodegenState):
        def record_syntactic_position(self, node, *, start_node=None, end_node=None):
            return _NO_MARK


_EMPTY = cst.Module(body=[])


def code_of(node: cst.CSTNode) -> str:
    """The code of `node` alone, as `Module.code_for_node` writes it."""
    if CodegenState is None:  # pragma: no cover - depends on the installed libcst
        return _EMPTY.code_for_node(node)
    state = _PlainState(default_indent=_EMPTY.default_indent, default_newline=_EMPTY.default_newline)
    node._codegen(state)
    return "".join(state.tokens)
