"""The one engine every front end calls: decode, prefilter, parse once, build the model, run rules,
honour `# noqa`, and apply fixes to a fixpoint."""

from __future__ import annotations

import ast
import difflib
import io
import re
import tokenize
from bisect import bisect_right
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Iterable, Mapping, Sequence

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from torchlint.analysis import FileModel
from torchlint.analysis.walk import walk
from torchlint import pyast
from torchlint.prune import prune
from torchlint.diagnostic import Diagnostic, Edit, Fix, FixInfo
from torchlint.rules import ALL_RULES, Finding, Rule

try:  # libcst's code generation state: internal, so a libcst that moves it gets the public (slower) path
    from libcst._nodes.internal import CodegenState
except ImportError:  # pragma: no cover - depends on the installed libcst
    CodegenState = object  # type: ignore[assignment,misc]

from torchlint.codes import FIX_ERROR, INTERNAL_ERROR, READ_ERROR, SYNTAX_ERROR  # noqa: E402,F401
ISSUES_URL = "https://github.com/torchlint/torchlint/issues"
MAX_FIX_ROUNDS = 10

_NEWLINE = re.compile(r"\r\n?|\n")  # what libcst counts as a line break
_NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)


class SourceError(Exception):
    """A file that cannot be turned into text: reported as one TL900 diagnostic."""

    def __init__(self, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class Decoded:
    text: str
    encoding: str  # as detected: "utf-8", "utf-8-sig" (BOM), "latin-1" (cookie) ...


def decode(data: bytes) -> Decoded:
    """Bytes to text the way Python itself reads a source file (BOM, coding cookie); newlines untouched."""
    if b"\0" in data:
        line = data.count(b"\n", 0, data.index(b"\0")) + 1
        raise SourceError("file contains null bytes; it is not Python source", line)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise SourceError(f"invalid encoding declaration: {exc}") from None
    try:
        return Decoded(data.decode(encoding), encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SourceError(f"cannot decode as {encoding}: byte 0x{data[exc.start]:02x} at line {line}", line) from None
    except LookupError:
        raise SourceError(f"unknown encoding {encoding!r}") from None


def select_rules(codes: Iterable[str] | None = None) -> list[type[Rule]]:
    if codes is None:
        return list(ALL_RULES)
    wanted = set(codes)
    return [r for r in ALL_RULES if r.code in wanted]


def rules_that_may_fire(text: str, rules: Sequence[type[Rule]]) -> list[type[Rule]]:
    """The prefilter: the rules whose necessary text (`Rule.requires`) the file holds; with none, the file is not
    parsed. Each pattern is searched at most once, and most files fail the first (a backward call, a step call)."""
    found: dict[re.Pattern[str], bool] = {}

    def has(p: re.Pattern[str]) -> bool:
        hit = found.get(p)
        if hit is None:
            hit = found[p] = p.search(text) is not None
        return hit

    return [rule for rule in rules if all(has(p) for p in rule.requires)]


@dataclass
class _Analysis:
    module: cst.Module | None
    findings: list[tuple[type[Rule], Finding]]
    errors: list[Diagnostic]
    source: str = ""  # what was parsed: the text, or the text with irrelevant functions blanked (same lines)
    tops: dict = field(default_factory=dict)  # FileModel.top_of


def _syntax_error(text: str, path: str, exc: Exception) -> Diagnostic:
    try:
        pyast.parse(text, path)
    except SyntaxError as err:
        line, col = err.lineno or 1, err.offset or 1
        return Diagnostic(path, line, col, line, col, SYNTAX_ERROR, f"syntax error: {err.msg}; file not checked")
    except (ValueError, RecursionError, MemoryError) as err:
        return Diagnostic(path, 1, 1, 1, 1, SYNTAX_ERROR, f"cannot parse: {err}; file not checked")
    line = getattr(exc, "raw_line", 1) or 1
    col = (getattr(exc, "raw_column", 0) or 0) + 1
    first = str(getattr(exc, "message", exc)).splitlines()[0] if str(exc) else type(exc).__name__
    return Diagnostic(path, line, col, line, col, SYNTAX_ERROR, f"cannot parse with libcst ({first}); file not checked")


def _analyze(text: str, path: str, rules: Sequence[type[Rule]], whole: bool = True) -> _Analysis:
    """Parse and run the rules. With `whole` False (reporting only), functions that cannot matter are blanked
    out before parsing (torchlint.prune); fixing always parses the whole text, since it rewrites it."""
    firing = rules_that_may_fire(text, rules)
    if not firing:
        return _Analysis(None, [], [])
    source = text if whole else prune(text, {rule.scope_patterns() for rule in firing})
    try:
        module = cst.parse_module(source)
    except Exception as exc:  # libcst raises ParserSyntaxError, and RecursionError on absurd nesting
        return _Analysis(None, [], [_syntax_error(text, path, exc)])
    text = source
    findings: list[tuple[type[Rule], Finding]] = []
    errors: list[Diagnostic] = []
    try:
        model = FileModel(module, text)
    except RecursionError:
        return _Analysis(None, [], [Diagnostic(path, 1, 1, 1, 1, INTERNAL_ERROR, "nesting too deep to analyse; file not checked")])
    except Exception as exc:  # a bug of ours must not stop the run
        return _Analysis(None, [], [_internal(path, "the training-loop model", exc)])
    seen: set[tuple[str, int]] = set()
    for rule in firing:
        try:
            for finding in rule().check(model):
                key = (rule.code, id(finding.node))
                if key not in seen:
                    seen.add(key)
                    findings.append((rule, finding))
        except Exception as exc:
            errors.append(_internal(path, rule.code, exc))
    return _Analysis(module, findings, errors, source, model.top_of)


def _internal(path: str, where: str, exc: Exception) -> Diagnostic:
    return Diagnostic(
        path, 1, 1, 1, 1, INTERNAL_ERROR,
        f"internal error in {where} ({type(exc).__name__}: {exc}); please report it at {ISSUES_URL} with this file",
    )


def _noqa_codes(line: str) -> set[str] | None:
    """None: no noqa; empty set: bare `# noqa` (everything); else the listed codes."""
    m = _NOQA.search(line)
    if m is None:
        return None
    codes = m.group("codes")
    return {c.upper() for c in re.split(r"[,\s]+", codes) if c} if codes else set()


def suppressed(lines: Sequence[str], diag: Diagnostic) -> bool:
    if not 1 <= diag.line <= len(lines):
        return False
    codes = _noqa_codes(lines[diag.line - 1])
    return codes is not None and (not codes or diag.code in codes)


def _positions(
    module: cst.Module, text: str, nodes: Sequence[cst.CSTNode], tops: Mapping[int, int] | None = None
) -> Mapping[cst.CSTNode, CodeRange]:
    """Positions of `nodes`, as libcst's PositionProvider gives them. Generating code is the cost, so only the
    top-level statements that hold the nodes are generated, with token marks instead of the provider's
    per-token bookkeeping (`_MarkingCodegenState`), and shifted by the line where each statement starts; the
    whole-module provider is the fallback."""
    try:
        return _positions_by_statement(module, text, nodes, tops or {})
    except (_Unmapped, SyntaxError, ValueError, RecursionError, MemoryError, AttributeError, TypeError):
        # TypeError/AttributeError: a libcst whose code generation internals differ from the ones we mark.
        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


class _Unmapped(Exception):
    pass


def _positions_by_statement(module: cst.Module, text: str, nodes: Sequence[cst.CSTNode], tops: Mapping[int, int]) -> dict:
    by_id = {id(n): n for n in nodes}
    wanted = set(by_id)
    holder_set = {tops[i] for i in wanted if i in tops}
    unknown = {i for i in wanted if i not in tops}
    if unknown:  # nodes no event points at (a detached subexpression): look for them, likeliest places first
        order = sorted(holder_set) + [i for i in range(len(module.body)) if i not in holder_set]
        for index in order:
            found = {id(n) for n in walk(module.body[index], descend_scopes=True)} & unknown
            if found:
                holder_set.add(index)
                unknown -= found
                if not unknown:
                    break
    holders = sorted(holder_set)
    if not holders:
        raise _Unmapped
    starts: list[int] | None = None
    out: dict = {}
    for index in holders:
        stmt = module.body[index]
        sub = cst.Module(body=[stmt], default_newline=module.default_newline, default_indent=module.default_indent)
        local, code = _positions_and_code(sub, wanted | {id(stmt)})
        # Where the statement's text (leading comments included) starts in the file: found by a plain search
        # when it occurs once; otherwise from `ast`, whose statement lines are exact.
        at = text.find(code)
        if at >= 0 and text.find(code, at + 1) < 0:
            shift = text.count("\n", 0, at)
        else:
            if starts is None:
                starts = _statement_lines(module, pyast.parse(text))
            shift = starts[index] - local[id(stmt)].start.line
        for key, rng in local.items():
            if key in wanted:
                out[by_id[key]] = CodeRange(
                    CodePosition(rng.start.line + shift, rng.start.column), CodePosition(rng.end.line + shift, rng.end.column)
                )
    if len(out) != len(wanted):
        raise _Unmapped
    return out


@dataclass
class _MarkingCodegenState(CodegenState):
    """Plain code generation that notes, per node, the token indexes where it starts and ends — the same ranges
    libcst's PositionProvider computes (syntactic where a node records one, else whitespace-inclusive), without
    tracking line and column on every token, which makes the provider five times slower than code generation.
    Only the nodes asked for are turned into lines and columns, afterwards."""

    marks: dict[int, tuple[int, int]] = field(default_factory=dict)
    _starts: list[int] = field(default_factory=list)
    popped: list[str] = field(default_factory=list)

    def pop_trailing_newline(self) -> None:
        # The provider's positions still count the newline a file without one at its end loses here.
        if self.tokens:
            self.popped.append(self.tokens.pop())

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._starts.append(len(self.tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._starts.pop()
        if id(node) not in self.marks:
            self.marks[id(node)] = (start, len(self.tokens) + len(self.popped))

    @contextmanager
    def record_syntactic_position(self, node, *, start_node=None, end_node=None):  # type: ignore[override]
        start = len(self.tokens)
        try:
            yield
        finally:
            marks = self.marks
            marks[id(node)] = (
                marks[id(start_node)][0] if start_node is not None else start,
                marks[id(end_node)][1] if end_node is not None else len(self.tokens),
            )


def _positions_and_code(sub: cst.Module, wanted: set[int] | None = None) -> tuple[dict[int, CodeRange], str]:
    """The code of `sub` and the ranges of its nodes (those in `wanted`, or all), keyed by id()."""
    state = _MarkingCodegenState(default_indent=sub.default_indent, default_newline=sub.default_newline)
    sub._codegen(state)
    code = "".join(state.tokens)
    tokens = state.tokens + state.popped
    offsets = list(accumulate(map(len, tokens), initial=0))
    line_starts = [0] + [m.end() for m in _NEWLINE.finditer("".join(tokens))]

    def position(token_index: int) -> CodePosition:
        offset = offsets[token_index]
        line = bisect_right(line_starts, offset)
        return CodePosition(line, offset - line_starts[line - 1])

    return {
        key: CodeRange(position(a), position(b))
        for key, (a, b) in state.marks.items()
        if wanted is None or key in wanted
    }, code


def _statement_lines(module: cst.Module, tree: ast.Module) -> list[int]:
    """First line of each libcst top-level statement (decorators included), from the `ast` of the same text:
    a libcst line of `a; b` is two ast statements, every other statement is one."""
    lines: list[int] = []
    i = 0
    for stmt in module.body:
        if i >= len(tree.body):
            raise _Unmapped
        lines.append(pyast.first_line(tree.body[i]))
        i += len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
    if i != len(tree.body):
        raise _Unmapped
    return lines


def _apply(module: cst.Module, fixes: Sequence[Fix]) -> cst.Module:
    changes = {id(old): new for fix in fixes for old, new in fix.changes}
    return module.visit(_Replacer(changes))


class _Replacer(cst.CSTTransformer):
    def __init__(self, changes: dict[int, object]) -> None:
        self.changes = changes

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        return self.changes.get(id(original_node), updated_node)


def _edits(before: str, after: str) -> tuple[Edit, ...]:
    """Line-granular text edits turning `before` into `after`."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    edits = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            edits.append(Edit(i1 + 1, 1, i2 + 1, 1, "".join(b[j1:j2])))
    return tuple(edits)


def lint_source(
    text: str,
    path: str = "<stdin>",
    rules: Sequence[type[Rule]] | None = None,
    *,
    honour_noqa: bool = True,
    with_edits: bool = False,
) -> list[Diagnostic]:
    """All diagnostics of one file's text, sorted by position."""
    rules = list(ALL_RULES) if rules is None else rules
    return _diagnostics(_analyze(text, path, rules, whole=with_edits), text, path, honour_noqa, with_edits)


def _diagnostics(
    analysis: _Analysis, text: str, path: str, honour_noqa: bool = True, with_edits: bool = False, positions=None
) -> list[Diagnostic]:
    """The analysis's findings and errors as sorted diagnostics (`positions` reused when already computed)."""
    diags = list(analysis.errors)
    if analysis.findings and analysis.module is not None:
        if positions is None:
            positions = _positions(analysis.module, analysis.source, [f.node for _, f in analysis.findings], analysis.tops)
        original = analysis.module.code if with_edits else ""
        for rule, f in analysis.findings:
            rng = positions[f.node]
            info = None
            if f.fix is not None:
                edits = _edits(original, _apply(analysis.module, [f.fix]).code) if with_edits else ()
                info = FixInfo(f.fix.applicability, f.fix.message, edits)
            diags.append(
                Diagnostic(
                    path, rng.start.line, rng.start.column + 1, rng.end.line, rng.end.column + 1,
                    rule.code, f.message, info,
                )
            )
    if honour_noqa and diags:
        lines = text.splitlines()
        diags = [d for d in diags if not suppressed(lines, d)]
    return sorted(diags, key=Diagnostic.sort_key)


@dataclass(frozen=True)
class FixResult:
    text: str  # the fixed source (unchanged when nothing applied or the file did not parse)
    applied: int  # number of fixes applied over all rounds
    remaining: list[Diagnostic]  # diagnostics left after fixing
    failed: list[Diagnostic]  # fixes whose result did not parse (discarded)


def fix_source(
    text: str,
    path: str = "<stdin>",
    rules: Sequence[type[Rule]] | None = None,
    *,
    unsafe: bool = False,
) -> FixResult:
    """Apply fixes round by round until none applies (at most MAX_FIX_ROUNDS rounds)."""
    rules = list(ALL_RULES) if rules is None else rules
    applied = 0
    failed: list[Diagnostic] = []
    bad_fixes: set[tuple[str, str]] = set()
    analysis: _Analysis | None = None
    positions = None
    for _ in range(MAX_FIX_ROUNDS):
        analysis, positions = _analyze(text, path, rules), None
        if analysis.module is None or not analysis.findings:
            break
        lines = text.splitlines()
        positions = _positions(
            analysis.module, text,
            [f.node for _, f in analysis.findings] + [old for _, f in analysis.findings if f.fix for old, _ in f.fix.changes],
            analysis.tops,
        )
        chosen: list[Fix] = []
        taken: list[tuple[tuple[int, int], tuple[int, int]]] = []
        for rule, f in analysis.findings:
            if f.fix is None or (f.fix.applicability == "unsafe" and not unsafe):
                continue
            start = positions[f.node].start
            probe = Diagnostic(path, start.line, start.column + 1, start.line, start.column + 1, rule.code, "")
            if suppressed(lines, probe) or (rule.code, f.message) in bad_fixes:
                continue
            spans = [positions[old] for old, _ in f.fix.changes]
            ranges = [((r.start.line, r.start.column), (r.end.line, r.end.column)) for r in spans]
            if any(s < te and ts < e for s, e in ranges for ts, te in taken):
                continue  # overlaps a fix chosen this round: it gets its turn in the next round
            # Check each fix on its own: one that yields invalid code is dropped and reported.
            candidate = _apply(analysis.module, [f.fix]).code
            try:
                cst.parse_module(candidate)
                pyast.parse(candidate, path)
            except Exception:
                bad_fixes.add((rule.code, f.message))
                failed.append(Diagnostic(path, start.line, start.column + 1, start.line, start.column + 1, FIX_ERROR,
                                         f"fix for {rule.code} produced invalid code and was discarded; please report it at {ISSUES_URL}"))
                continue
            chosen.append(f.fix)
            taken.extend(ranges)
        if not chosen:
            break
        new_text = _apply(analysis.module, chosen).code
        if new_text == text:
            break
        text, analysis = new_text, None
        applied += len(chosen)
    # The last analysis is of the final text unless the round limit stopped right after a rewrite.
    remaining = lint_source(text, path, rules) if analysis is None else _diagnostics(analysis, text, path, positions=positions)
    return FixResult(text, applied, remaining, failed)
