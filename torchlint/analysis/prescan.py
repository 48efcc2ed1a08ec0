"""What is read from a file's text before it is parsed (cheap, and enough to decide whether parsing it can
matter): the names its import statements bind (`scan_imports`), and which of its functions and methods may act,
that is hold a backward, a step or a zero_grad, themselves or through the file's helpers (`acting`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from torchlint.analysis.semantics import OTHER_FRAMEWORKS, TORCH_PACKAGES
from torchlint.source.lines import split_lines
from torchlint.source.words import word_start

# Text that any exported event needs (a backward, a step, a zero_grad or gradient reset, a GradScaler call, a
# clip, a gradient hook); `_STEP_TEXT`: the same but a clip or a hook, which neither steps nor clears (`inert`)
_STEP_TEXT = (r"\.backward\s*\(|manual_backward\s*\(|\.\s*step\s*\(|optimizer_step\s*\(|zero_grad"
              r"|\.grad\s*=\s*None|\.grad\.zero_")
EVENT_TEXT = re.compile(_STEP_TEXT + r"|clip_grad_(?:norm|value)|\.grad(?:\.data)?\.clamp_|register_hook\s*\(")
STEP_TEXT = re.compile(_STEP_TEXT)
EVENT_BYTES = re.compile(EVENT_TEXT.pattern.encode())

_IMPORTS = re.compile(
    r"(?m)^[ \t]*(?:from[ \t]+(\.*)[ \t]*([\w.]*)[ \t]+)?import[ \t]+(\([^)]*\)|(?:[^\n#;\\]|\\\n)*)"
)


@dataclass(frozen=True)
class Imported:
    """What a name of the importing file is bound to: a module (`name` None) or a name in a module."""

    module: str  # dotted, without the leading dots
    level: int  # leading dots of a relative import
    name: str | None = None
    subs: tuple[str, ...] = ()  # `import a.b.c` binds `a` and names its submodule `b.c`


def scan_imports(text: str) -> dict[str, Imported]:
    """The names a file binds by import statements, read from its text (any indentation; an import in a string
    is read too, which only makes a call resolvable that the file's model then checks against its own code). A name
    imported from two different places (`if torch.__version__ >= "1.6": from torch.cuda.amp import GradScaler`,
    `else: from .amp_dummy import GradScaler`) is left out: which of the two runs is not known."""
    bound: dict[str, Imported] = {}
    ambiguous: set[str] = set()
    for m in _import_lines(text):
        names = m.group(3).strip("()").replace("\\\n", " ")
        if m.group(2) is not None:  # from X import a, b as c
            dots, module = len(m.group(1)), m.group(2)
            for item in names.split(","):
                parts = item.split()
                if parts and parts[0] != "*":
                    local = parts[2] if len(parts) == 3 and parts[1] == "as" else parts[0]
                    new = Imported(module, dots, parts[0])
                    if local in bound and bound[local] != new:
                        ambiguous.add(local)  # `from torch.cuda.amp import GradScaler`, else a stand-in of the project
                    bound[local] = new
            continue
        for item in names.split(","):  # import a.b, c as d
            parts = item.split()
            if not parts:
                continue
            if len(parts) == 3 and parts[1] == "as":
                bound[parts[2]] = Imported(parts[0], 0)
            else:
                head, _, sub = parts[0].partition(".")
                known = bound.get(head)
                subs = known.subs if known is not None and known.name is None and known.module == head else ()
                bound[head] = Imported(head, 0, None, subs + ((sub,) if sub else ()))
    for local in ambiguous:  # bound on alternative branches to different things: which one runs is not known
        del bound[local]
    return bound


def star_imports(text: str) -> list[Imported]:
    """The modules a file imports everything from (`from utils import *`), in order."""
    return [Imported(m.group(2), len(m.group(1))) for m in _import_lines(text)
            if m.group(2) is not None and m.group(3).strip("()").strip() == "*"]


def top_level_names(text: str) -> list[str]:
    """The functions and classes a file defines at its top level (read from the text): what `import *` of it binds
    of what may act."""
    return [m.group(1) for m in _TOP_DEF.finditer(text) if not m.group(1).startswith("_")]


def _import_lines(text: str) -> Iterator[re.Match[str]]:
    """`_IMPORTS` matched at the start of each line holding `import` (found by a plain substring search, much
    faster than letting the pattern try every line)."""
    pos, done = 0, -1
    while True:
        hit = text.find("import", pos)
        if hit < 0:
            return
        start = text.rfind("\n", 0, hit) + 1
        pos = hit + 6
        if start <= done:
            continue
        m = _IMPORTS.match(text, start)
        if m is not None:
            done = m.end()
            pos = max(pos, done)
            yield m


def acting(text: str) -> frozenset[str]:
    """The functions (`f`) and methods (`Class.method`) of a file whose code, or the code of the file's functions
    (or the class's methods) they call, holds event text: the only ones a caller in another file gains events
    from. Read from the text with docstrings and comments dropped; only these are exported."""
    index = _definitions(text)
    classes = {name.split(".", 1)[0] for name in index if "." in name}
    out = set()
    for name, piece in index.items():
        if name in classes:
            continue  # a class acts through its methods
        if EVENT_TEXT.search(piece) or any(EVENT_TEXT.search(index[c]) for c in _called_names(piece)
                                           if c in index and c != name):
            out.add(name)
        elif "." in name:
            cls = name.split(".", 1)[0]
            if any(EVENT_TEXT.search(index.get(f"{cls}.{m}", "")) for m in _self_calls(piece)):
                out.add(name)
    return frozenset(out)


def inert(text: str) -> frozenset[str]:
    """The top-level functions of a file that can neither step nor clear gradients: no event text but a clip's
    (which changes gradients, never clears them) and no write to a `.grad` (`p.grad.data.zero_()`) in their code or
    in the code of the file's functions they call, and no call of a name the file does not define but the builtins
    that touch no gradient. A call of one (`utils.clip(opt, 5)`) is handed the optimizer and leaves its gradients
    as they are. Read from the text, like `acting`."""
    index = _definitions(text)
    out = set()
    for name, piece in index.items():
        if "." in name or not piece.lstrip().startswith(("def", "async")):
            continue  # a class (or a method): only plain functions are judged
        called = _called_names(piece) - {name}
        if not called <= index.keys() | _HARMLESS_BUILTINS:
            continue
        pieces = [piece] + [index[c] for c in called if c in index]
        if not any(STEP_TEXT.search(p) or _GRAD_WRITE.search(p) for p in pieces):
            out.add(name)
    return frozenset(out)


def _definitions(text: str) -> dict[str, str]:
    """The text of each top-level function and class (`name`) and of each method (`Class.method`), split at lines
    by indentation: a cheap superset, only used to decide whether a file is worth parsing."""
    out: dict[str, str] = {}
    lines = split_lines(text, keepends=True)
    top: list[tuple[str, int]] = []  # (qualified name, first line)
    methods: list[tuple[str, int, int]] = []  # (qualified name, first line, indent)
    for i, line in enumerate(lines):
        m = _DEF_LINE.match(line)
        if m is None:
            continue
        indent, kind, name = len(m.group(1).expandtabs()), m.group(2), m.group(3)
        if indent == 0:
            top.append((name, i))
        elif kind == "def" and top and lines[top[-1][1]].lstrip().startswith("class"):
            methods.append((f"{top[-1][0]}.{name}", i, indent))
    starts = [i for i, line in enumerate(lines) if line[:1] not in ("", " ", "\t", "\n", "\r", "#", ")", "]", "}")]
    for name, first in top:
        end = next((s for s in starts if s > first and not lines[s].startswith(("@", "else", "elif", "except",
                                                                               "finally"))), len(lines))
        out[name] = _code_only("".join(lines[first:end]))
    for name, first, indent in methods:
        end = first + 1
        while end < len(lines):
            line = lines[end]
            stripped = line.strip()
            if stripped and not stripped.startswith("#") and len(line) - len(line.lstrip()) <= indent and not \
                    stripped.startswith((")", "]", "}")):
                break
            end += 1
        out[name] = _code_only("".join(lines[first:end]))
    return out


def _code_only(text: str) -> str:
    """Without docstrings and comments (whose `.backward()` examples are not calls): a cheap approximation."""
    return _COMMENT.sub("", _TRIPLE.sub("", text))


def _self_calls(text: str) -> set[str]:
    return {m.group(1) for m in SELF_CALL.finditer(text)}


def _called_names(text: str) -> set[str]:
    return {m.group(1) for m in _BARE_CALL.finditer(text)}


# A write to a gradient besides the events' own text: `p.grad.data.zero_()`, `p.grad = torch.zeros_like(p)`.
_GRAD_WRITE = re.compile(r"\.grad\b(?:\s*\.\s*data\b)?\s*(?:=(?!=)|\.\s*(?:zero_|fill_|detach_|mul_|copy_|set_)\s*\()"
                         r"|zero_grad|set_to_none")
_HARMLESS_BUILTINS = frozenset({
    "print", "len", "range", "enumerate", "zip", "isinstance", "min", "max", "abs", "sum", "float", "int", "str",
    "list", "dict", "tuple", "set", "sorted", "round", "getattr", "hasattr", "format", "any", "all", "map", "filter",
})
_TOP_DEF = re.compile(r"(?m)^(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)")
_TRIPLE = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'')
_COMMENT = re.compile(r"#[^\n]*")
CLASS_LINE = re.compile(r"(?m)^class[ \t]+(\w+)[ \t]*(?:\(([^)]*)\)|(?=:))")  # `class C:` too: no bases
_DEF_LINE = re.compile(r"([ \t]*)(?:async[ \t]+)?(def|class)[ \t]+(\w+)")
_BARE_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*\(")
OBJECT_CALL = re.compile(r"(?<![\w.])((?:self\s*\.\s*)?[A-Za-z_]\w*)\s*\.\s*([A-Za-z_]\w*)\s*\(")  # obj.method(
SELF_CALL = re.compile(word_start("self") + r"\s*\.\s*([A-Za-z_]\w*)\s*\(")
_CLASS_HEAD = re.compile(r"class[ \t]+\w+[ \t]*\(([^)]*)\)")  # found by its literal start: fast


def class_bases(text: str) -> list[str]:
    """What each class statement of the text lists in its parentheses (`class A(nn.Module):` -> `nn.Module`): a
    `class` that only spaces put after its line's start."""
    out = []
    for m in _CLASS_HEAD.finditer(text):
        start = m.start()
        if not text[text.rfind("\n", 0, start) + 1:start].strip(" \t"):
            out.append(m.group(1))
    return out


def other_framework(text: str) -> bool:
    """The file imports another deep-learning framework (Paddle, TensorFlow, MindSpore ...) and nothing of
    PyTorch's: its `loss.backward()` and `optimizer.step()` are that framework's, not PyTorch's. A file that also
    imports PyTorch, or that imports neither, is checked as usual."""
    tops = {imp.module.split(".", 1)[0] for imp in scan_imports(text).values() if imp.level == 0}
    return bool(tops & OTHER_FRAMEWORKS) and not tops & TORCH_PACKAGES
