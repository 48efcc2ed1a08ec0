"""Parse only what can hold a finding.

A file that passes the prefilter often holds one training loop among hundreds of unrelated functions (a test
module, a compiler pass that mentions "Scheduler"). libcst parsing is the linter's whole budget, so before it,
`ast` (about ten times faster) finds the functions and methods that cannot hold a finding, and their lines are
blanked out, keeping every line number; libcst parses the rest.

Each rule states the text a function must contain to hold one of its findings (`Rule.scope_conditions`: a backward
call, a loop, a step ...), read together with the helpers of the same file it calls, two levels deep, exactly as
deep as the model inlines them. A function is kept when, with its helpers, it contains every pattern of some rule
that can fire on the file; so are those helpers (their events are inlined), `__init__` and every function that
constructs an optimizer, scheduler, scaler or Accelerate/DeepSpeed object (the model reads what names stand for
from those assignments, anywhere in the file). Module-level code and class bodies are always kept, and the helpers
they call when they themselves could hold a finding. Calls are matched by name, over-approximating the model's
resolution (any identifier naming a function of the file counts, which also covers LBFGS closures passed by
name), so this never hides a finding.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from itertools import accumulate
from typing import Iterable, Mapping, Sequence

from torchlint.source import pyast
from torchlint.source.lines import split_lines
from torchlint.source.words import any_word, occurs, starts, word_start
from torchlint.analysis.events import INLINE_DEPTH  # how deep the model inlines helpers
from torchlint.analysis.names import OPTIMIZER_CLASSES

# An `ast` parse costs about an eighth of libcst's, and when the file has findings their positions reuse it
# (`prune_with_tree`), so pruning pays once a tenth of the text can be blanked. Counted in instructions, on files
# of training code with small helpers beside them (the synthetic corpus) it costs what it saves; on the usual
# file, where most functions cannot matter, it saves most of the parse.
MIN_LINES = 50  # below this there is too little to blank
KEEP_SHARE = 0.9  # when definitions that may hold a finding alone are more of the text, it is not pruned
_WORD = re.compile(r"\w")
# A line that starts a definition (its decorator, `def`, `class`), found from the line break before it: a pattern
# that starts with `^` is tried at every position, one that starts with a literal only where it stands.
_DEF_LINE = re.compile(r"\n(?=[ \t]{0,8}(?:@|(?:async[ \t]+)?def[ \t]|class[ \t]))")
_Def = ast.FunctionDef | ast.AsyncFunctionDef  # what pruning may blank
_BLOCKS = (ast.If, ast.Try, ast.With, ast.AsyncWith, getattr(ast, "TryStar", ast.Try))  # holding definitions
# Every call that torchlint.analysis.names.role_of_value recognises (optimizer classes and `optim.*`, scheduler
# classes and `lr_scheduler.*`, GradScaler, Accelerator/Fabric, deepspeed.initialize) contains one of these;
# `__init__`, `__setitem__` (run by `obj[key] = value`) and `__call__` (run by `obj(x)`), never called by name, are
# always kept.
_DEFINES = re.compile(
    word_start("optim") + r"\.|" + word_start("optimizers") + r"\s*\(|lr_scheduler|LR\s*\(|ReduceLROnPlateau"
    r"|_schedule\w*\s*\(|Schedule\w*\s*\(|deepspeed\.initialize|" + word_start("def") + r" __(?:init|setitem|call)__\b"
    r"|" + any_word({"GradScaler", "Accelerator", "Fabric", *OPTIMIZER_CLASSES}, r"\s*\(")
)


def prune(
    text: str, conditions: Iterable[Sequence[re.Pattern[str]]], stand_ins: Mapping[str, str] | None = None
) -> str:
    """`text` with irrelevant function definitions blanked: each replaced by `pass`, or by one string over its
    lines (same line count, nothing on them for libcst to make nodes of).

    `conditions`: for each rule that can fire on the file, the patterns a function (with its helpers) must
    all contain to hold one of its findings. `stand_ins`: functions of other files of the project the text calls
    (`train_step`, `engine.run`, `self.fit`), with the text of their events: a call to one counts as that text."""
    return prune_with_tree(text, conditions, stand_ins)[0]


def prune_with_tree(
    text: str, conditions: Iterable[Sequence[re.Pattern[str]]], stand_ins: Mapping[str, str] | None = None
) -> tuple[str, ast.Module | None]:
    """`prune`, and the `ast` of `text` where it parsed one (None where it did not): positions reuse it, so a file
    with findings is parsed by `ast` once. Its statements stand where the pruned text's do (a blanked definition
    is one statement too: `pass`, or a string over its lines)."""
    if text.count("\n") + 1 < MIN_LINES and text.count("\r") + 1 < MIN_LINES:
        return text, None
    conds = [tuple(c) for c in conditions]
    if not stand_ins:
        # A condition one of whose patterns the text never matches holds nowhere: drop it before its other patterns
        # are scanned for every position (each pattern searched at most once, the condition's last, rarest, first).
        found: dict[re.Pattern[str], bool] = {}

        def seen(p: re.Pattern[str]) -> bool:
            known = found.get(p)
            if known is None:
                known = found[p] = occurs(p, text)
            return known
        conds = [c for c in conds if all(seen(p) for p in reversed(c))]
    patterns = list(dict.fromkeys(p for c in conds for p in c))
    bit = {p: 1 << i for i, p in enumerate(patterns)}
    needs = [sum(bit[p] for p in c) for c in conds]
    hits = {p: starts(p, text) for p in patterns}
    for name, events in (stand_ins or {}).items():
        head = r"self\s*\." + re.escape(name[5:]) if name.startswith("self.") else re.escape(name).replace(r"\.", r"\s*\.\s*")
        call_starts = [m.start() for m in re.finditer(rf"(?<![\w.]){head}\s*\(", text)]
        for p in patterns:
            if call_starts and p.search(events):
                hits[p] = sorted(hits[p] + call_starts)

    def masks(spans: Sequence[tuple[int, int]]) -> list[int]:
        """For each span (in order, none overlapping): the bits of the patterns that match inside it."""
        firsts = [a for a, _ in spans]
        out = [0] * len(spans)
        for p, pos in hits.items():
            b = bit[p]
            for x in pos:
                k = bisect_right(firsts, x) - 1
                if k >= 0 and x < spans[k][1]:
                    out[k] |= b
        return out

    def sufficient(m: int) -> bool:
        return any(m & n == n for n in needs)

    # Cheap estimate first: when most of the text sits in definitions that could hold a finding by themselves
    # (a file of training code), the `ast` pass would cost more than it saves.
    bounds = [0] * bool(_DEF_LINE.match("\n" + text)) + [m.end() for m in _DEF_LINE.finditer(text)] + [len(text)]
    chunks = list(zip(bounds, bounds[1:]))
    if sum(b - a for (a, b), m in zip(chunks, masks(chunks)) if sufficient(m)) > len(text) * KEEP_SHARE:
        return text, None
    try:
        tree = pyast.parse(text.removeprefix("\ufeff"))  # CPython refuses a BOM in a str
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text, None  # libcst will report it
    defs = _definitions(tree)
    if not defs:
        return text, tree

    lines = split_lines(text, keepends=True)
    offsets = list(accumulate(map(len, lines), initial=0))

    def span(node: _Def) -> tuple[int, int]:
        return offsets[pyast.first_line(node) - 1], offsets[node.end_lineno or node.lineno]

    spans = [span(d) for d, _ in defs]
    functions: dict[str, list[int]] = {}
    methods: dict[tuple[str, str], list[int]] = {}
    for i, (d, cls) in enumerate(defs):
        if cls is None:
            functions.setdefault(d.name, []).append(i)
        else:
            methods.setdefault((cls, d.name), []).append(i)

    by_method: dict[str, list[int]] = {}
    for (_, name), indices in methods.items():
        by_method.setdefault(name, []).extend(indices)

    refs = _references(text, functions.keys() | by_method.keys())
    firsts = [a for a, _ in spans]

    def callees(where: Iterable[tuple[int, str, str]], cls: str | None = None) -> set[int]:
        found: set[int] = set()
        for _, how, n in where:
            if how == "bare":
                found.update(functions.get(n, ()))
            elif how == "self" and cls is not None:
                found.update(methods.get((cls, n), ()))
            elif how == "method":
                # `trainer.train_step(x)`: a method of an object may be any class's of the file (receiver types decide)
                found.update(by_method.get(n, ()))
        return found

    inside: list[list[tuple[int, str, str]]] = [[] for _ in spans]
    outside_refs: list[tuple[int, str, str]] = []
    for ref in refs:
        k = bisect_right(firsts, ref[0]) - 1
        (inside[k] if k >= 0 and ref[0] < spans[k][1] else outside_refs).append(ref)
    own = masks(spans)
    calls = [callees(found, cls) for found, (_, cls) in zip(inside, defs)]

    def reach(first: set[int]) -> set[int]:
        """Helpers reached from calls `first`, as deep as the model inlines."""
        seen, frontier = set(first), set(first)
        for _ in range(INLINE_DEPTH - 1):
            frontier = {j for i in frontier for j in calls[i]} - seen
            seen |= frontier
        return seen

    keep: set[int] = set()
    for i, (a, b) in enumerate(spans):
        helpers = reach(calls[i])
        closure = own[i]
        for j in helpers:
            closure |= own[j]
        if sufficient(closure):
            keep.add(i)
            keep |= helpers
        elif _DEFINES.search(text, a, b):
            keep.add(i)
    # A factory `__init__` binds an object with (`self.loss_fn = create_loss(cfg)`, `def create_loss(cfg) ->
    # DualLoss`): the receivers read the object's class from its return annotation.
    for i in [i for i in keep if defs[i][0].name == "__init__"]:
        keep |= {j for j in calls[i] if isinstance(defs[j][0].returns, ast.Name) or isinstance(
            defs[j][0].returns, ast.Constant) and isinstance(defs[j][0].returns.value, str)}  # type: ignore[union-attr]  # by isinstance
    # Module-level code and class bodies: always kept; their helpers too when they could hold a finding.
    outside, pos = [], 0
    for a, b in spans:
        outside.append((pos, a))
        pos = b
    outside.append((pos, len(text)))
    helpers = reach(callees(outside_refs))
    closure = 0
    for m in masks(outside):
        closure |= m
    for j in helpers:
        closure |= own[j]
    if sufficient(closure):
        keep |= helpers

    drop = [d for i, (d, _) in enumerate(defs) if i not in keep]
    if not drop:
        return text, tree
    out = list(lines)
    for d in drop:
        first, last = pyast.first_line(d), d.end_lineno or d.lineno
        if not _owns_lines(lines, d, first, last):
            continue
        indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
        if first == last:
            # `pass` keeps a class whose every method is dropped valid
            out[first - 1] = f"{indent}pass{_ending(lines[last - 1])}"
            continue
        # One string over the same lines: libcst makes one token of it, where blank lines are nodes each.
        out[first - 1] = f'{indent}"""{_ending(lines[first - 1])}'
        for i in range(first, last - 1):
            out[i] = _ending(lines[i]) or "\n"
        out[last - 1] = f'"""{_ending(lines[last - 1])}'
    return "".join(out), tree


def _references(text: str, names: Iterable[str]) -> list[tuple[int, str, str]]:
    """Where each of `names` stands in `text` as a whole identifier, and as what, by position. How the model resolves
    a call: a "bare" name (`helper(x)`, or `fn` passed by name; never after `def ` or a dot) is a function of the
    module or a closure; "self" (`self.fit`, spaces allowed around the dot) a method of the caller's class;
    "method" (`obj.fit(`, a dot not after `self`) a method of any class of the file, as receiver types decide.
    Each name is looked for as a string (`str.find`), where reading every word of the text would cost more."""
    found: list[tuple[int, str, str]] = []
    for name in names:
        i = -1
        while (i := text.find(name, i + 1)) >= 0:
            end = i + len(name)
            if i and _WORD.match(text, i - 1) or _WORD.match(text, end):
                continue  # inside a longer identifier
            if not i or text[i - 1] != "." and not (i >= 4 and text.startswith("def ", i - 4)):
                found.append((i, "bare", name))
            dot = i
            while dot and text[dot - 1].isspace():
                dot -= 1
            if not dot or text[dot - 1] != ".":
                continue
            dot -= 1
            head = dot
            while head and text[head - 1].isspace():
                head -= 1
            if head >= 4 and text.startswith("self", head - 4) and not (head > 4 and _WORD.match(text, head - 5)):
                found.append((i, "self", name))
            after = end
            while after < len(text) and text[after].isspace():
                after += 1
            if text.startswith("(", after) and not (dot >= 4 and text.startswith("self", dot - 4)):
                found.append((i, "method", name))
    found.sort()
    return found


def _ending(line: str) -> str:
    return line[len(line.rstrip("\r\n")):]


def _definitions(tree: ast.Module) -> list[tuple[_Def, str | None]]:
    """Module-level functions and the methods of classes (with the class name), also where a module-level `if`,
    `try` or `with` holds them (`if HAS_CUDA: class T:`) and in a class nested in a class (its own name: `self`
    there is an instance of it); functions nested in functions stay with their parent."""
    found: list[tuple[_Def, str | None]] = []
    _visit_definitions(tree.body, None, found)
    return found


def _visit_definitions(body: list[ast.stmt], cls: str | None, found: list[tuple[_Def, str | None]]) -> None:
    # A function of the module, not a closure: a closure that calls itself is a reference cycle, which would keep
    # the tree alive until the cycle collector finds it.
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((node, cls))
        elif isinstance(node, ast.ClassDef):
            _visit_definitions(node.body, node.name, found)
        elif isinstance(node, _BLOCKS):
            for block in (getattr(node, "body", []), getattr(node, "orelse", []), getattr(node, "finalbody", [])):
                _visit_definitions(block, cls, found)
            for handler in getattr(node, "handlers", []):
                _visit_definitions(handler.body, cls, found)


def _owns_lines(lines: list[str], node: _Def, first: int, last: int) -> bool:
    """The definition starts its first line and nothing else follows it on its last line."""
    head = lines[first - 1]
    if len(head) - len(head.lstrip()) != _first_col(node):
        return False
    tail = lines[last - 1].rstrip("\r\n").encode("utf-8")
    end_col = node.end_col_offset or 0  # a UTF-8 byte offset
    rest = tail[end_col:].strip()
    return rest == b"" or rest.startswith(b"#")


def _first_col(node: _Def) -> int:
    decorators = getattr(node, "decorator_list", [])
    if decorators:
        return decorators[0].col_offset - 1  # the `@` precedes the decorator expression
    return node.col_offset
