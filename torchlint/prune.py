"""Parse only what can hold a finding.

A file that passes the text prefilter often holds one training loop among hundreds of unrelated functions
(a test module, a utilities file). libcst parsing is the linter's whole budget, so before it, `ast` (about ten
times faster) finds the functions and methods whose text cannot matter: those that match none of the rules'
trigger patterns, are not called from one that does and do not call one (two levels, as deep as the model
follows helpers).
Their lines are blanked out, keeping every line number, and libcst parses the rest.

This never hides a finding: every rule needs a trigger (a backward call, a scheduler) in the scope it reports
on or in a helper that scope calls, and module-level code, class bodies and all assignments outside functions
are kept, and so are `__init__` and every function that constructs an optimizer, scheduler, scaler or
Accelerate/DeepSpeed object (they define what names stand for).
"""

from __future__ import annotations

import ast
import re
from typing import Iterable

from torchlint import pyast

MIN_LINES = 300  # below this, pruning saves less than the `ast` pass costs
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
# Every trigger and _DEFINES alternative contains one of these: a text without any is irrelevant, found with
# fast substring search before any regular expression runs.
_WORDS = ("backward", "grad(", "sched", "LR", "chedul", "optim", "Adam", "SGD", "Ada", "RMSprop", "Rprop", "LBFGS",
          "Lion", "Scaler", "Accelerator", "Fabric", "deepspeed", "__init__")
_DEF_START = re.compile(r"(?m)^(?=[ \t]{0,8}(?:@|(?:async[ \t]+)?def[ \t]|class[ \t]))")
# Functions that build what names stand for (optimizers and the models they own, schedulers, scalers,
# Accelerate/DeepSpeed objects) are kept: the model reads their assignments.
_DEFINES = re.compile(
    r"\boptim\.\w+\(|\b(SGD|Adam\w*|RMSprop|Rprop|LBFGS|Adagrad|Adadelta|Adamax|NAdam|RAdam|Lion|GradScaler|Accelerator"
    r"|Fabric)\(|deepspeed\.initialize|lr_scheduler|Schedule|LR\(|\bdef __init__\b"
)


def prune(text: str, triggers: Iterable[re.Pattern[str]]) -> str:
    """`text` with irrelevant function definitions replaced by blank lines (same line count)."""
    lines = text.splitlines(keepends=True)
    if len(lines) < MIN_LINES:
        return text
    patterns = list(triggers)

    def matters(chunk: str) -> bool:
        return any(w in chunk for w in _WORDS) and (any(p.search(chunk) for p in patterns) or bool(_DEFINES.search(chunk)))

    # Cheap estimate first: when most of the text sits in definitions that match a trigger anyway (a file of
    # training code), the `ast` pass would cost more than it saves.
    chunks = _DEF_START.split(text)
    matching = sum(len(c) for c in chunks if matters(c))
    if matching > len(text) // 2:
        return text
    try:
        tree = pyast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text  # libcst will report it
    defs = _definitions(tree)
    if not defs:
        return text

    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    segments: dict[int, str] = {}

    def segment(node: ast.AST) -> str:
        key = id(node)
        seg = segments.get(key)
        if seg is None:
            seg = segments[key] = text[starts[_first_line(node) - 1] : starts[node.end_lineno or node.lineno]]
        return seg

    relevant = [d for d in defs if matters(segment(d))]
    if len(relevant) == len(defs):
        return text
    keep = {id(d) for d in relevant}
    by_name: dict[str, list[ast.AST]] = {}
    for d in defs:
        by_name.setdefault(d.name, []).append(d)  # type: ignore[attr-defined]
    calls = {id(d): set(_CALLED.findall(segment(d))) for d in defs}
    # Helpers called from relevant code or from module level are kept (the model inlines them), and so are
    # the callers of relevant code (the loop that calls `self.train_step(batch)` lives there): two levels.
    module_level = "".join(
        segment(node) for node in tree.body if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    )
    frontier = list(relevant)
    called = set(_CALLED.findall(module_level))
    for _ in range(2):
        names = called | {n for d in frontier for n in calls[id(d)]}
        frontier_names = {d.name for d in frontier}  # type: ignore[attr-defined]
        added = []
        for d in defs:
            if id(d) in keep:
                continue
            if d.name in names or calls[id(d)] & frontier_names:  # type: ignore[attr-defined]
                keep.add(id(d))
                added.append(d)
        if not added:
            break
        frontier, called = added, set()
    drop = [d for d in defs if id(d) not in keep]
    if not drop:
        return text
    out = list(lines)
    for d in drop:
        first, last = _first_line(d), d.end_lineno or d.lineno
        if not _owns_lines(lines, d, first, last):
            continue
        indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
        newline = "\r\n" if lines[last - 1].endswith("\r\n") else "\n"
        # `pass` keeps a class whose every method is dropped valid; one line, the rest blank.
        out[first - 1] = f"{indent}pass{newline}"
        for i in range(first, last):
            out[i] = "\r\n" if lines[i].endswith("\r\n") else "\n"
    return "".join(out)


def _definitions(tree: ast.Module) -> list[ast.AST]:
    """Module-level functions and the methods of module-level classes (nested ones stay with their parent)."""
    found: list[ast.AST] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(node)
        elif isinstance(node, ast.ClassDef):
            found.extend(n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return found


def _first_line(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno] + [d.lineno for d in decorators])  # type: ignore[attr-defined]


def _owns_lines(lines: list[str], node: ast.AST, first: int, last: int) -> bool:
    """The definition starts its first line and nothing else follows it on its last line."""
    head = lines[first - 1]
    if len(head) - len(head.lstrip()) != _first_col(node):
        return False
    tail = lines[last - 1].rstrip("\r\n").encode("utf-8")
    end_col = node.end_col_offset or 0  # type: ignore[attr-defined]  (a UTF-8 byte offset)
    rest = tail[end_col:].strip()
    return rest == b"" or rest.startswith(b"#")


def _first_col(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", [])
    if decorators:
        return decorators[0].col_offset - 1  # the `@` precedes the decorator expression
    return node.col_offset  # type: ignore[attr-defined]
