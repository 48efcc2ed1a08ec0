"""Stage 5: line and column of the nodes findings point at, as libcst's PositionProvider gives them, computed
only for the top-level statements that hold them."""

from __future__ import annotations

import ast
import gc
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Mapping, Sequence

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from torchlint.source import pyast
from torchlint.source.walk import walk

try:  # libcst's code generation state: internal, so a libcst that moves it gets the public (slower) path
    from libcst._nodes.internal import CodegenState
except ImportError:  # pragma: no cover - depends on the installed libcst
    CodegenState = object  # type: ignore[assignment,misc]  # the class where libcst has it; a plain base otherwise

_NEWLINE = re.compile(r"\r\n?|\n")  # what libcst counts as a line break


def positions(
    module: cst.Module,
    text: str,
    nodes: Sequence[cst.CSTNode],
    tops: Mapping[int, int] | None = None,
    statements: Mapping[int, cst.CSTNode] | None = None,
    tree: ast.Module | None = None,
) -> Mapping[cst.CSTNode, CodeRange]:
    """Positions of `nodes`, as libcst's PositionProvider gives them. Generating code is the cost, so only the
    statements that hold the nodes are generated, with token marks instead of the provider's per-token
    bookkeeping (`_MarkingCodegenState`), and shifted by the line where each statement starts (from `ast`).
    `tops`: id(node) -> index of the top-level statement holding it; `statements`: id(node) -> the innermost
    statement holding it, where the model knows it (then that statement alone is generated, not the whole
    function around it). `tree`: the `ast` of the text, where the caller has it (pruning parsed it). The
    whole-module provider is the fallback."""
    try:
        return _positions_by_statement(module, text, nodes, tops or {}, statements or {}, tree)
    except (_Unmapped, SyntaxError, ValueError, RecursionError, MemoryError, AttributeError, TypeError):
        # TypeError/AttributeError: a libcst whose code generation internals differ from the ones we mark.
        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


class _Unmapped(Exception):
    pass


def _positions_by_statement(
    module: cst.Module, text: str, nodes: Sequence[cst.CSTNode], tops: Mapping[int, int],
    statements: Mapping[int, cst.CSTNode], tree: ast.Module | None = None,
) -> dict:
    by_id = {id(n): n for n in nodes}
    wanted = set(by_id)
    searched: set[int] = set()  # the top-level statements that hold nodes no event points at
    unknown = {i for i in wanted if i not in tops}
    if unknown:  # nodes no event points at (a detached subexpression): look for them, likeliest places first
        known = {tops[i] for i in wanted if i in tops}
        order = sorted(known) + [i for i in range(len(module.body)) if i not in known]
        for index in order:
            found = {id(n) for n in walk(module.body[index], descend_scopes=True)} & unknown
            if found:
                searched.add(index)
                unknown -= found
                if not unknown:
                    break
    holder_set = {tops[i] for i in wanted if i in tops} | searched
    if not holder_set:
        raise _Unmapped
    # The line where each statement starts, from `ast`, whose statement lines are exact: one parse of the file,
    # where searching the file for each statement's text (and counting the line breaks before it) cost the whole
    # file per statement, quadratic in a long file with many findings.
    tree = tree if tree is not None else _ast_of(text)
    if tree is None:  # text CPython's parser refuses and libcst's takes: the whole-module provider
        raise _Unmapped
    firsts = _top_level_pairs(module, tree)
    out: dict = {}
    # A node whose innermost statement is known: that statement alone, with the indentation of its blocks.
    inner: dict[int, tuple[cst.CSTNode, list[int]]] = {}
    for key in wanted:
        stmt = statements.get(key)
        if stmt is not None and key in tops:
            inner.setdefault(id(stmt), (stmt, []))[1].append(key)
    if inner:
        _place_in_statements(module, tree, firsts, tops, inner, by_id, out)
    # The rest: the top-level statements that hold them, generated whole.
    placed = {id(n) for n in out}
    rest = wanted - placed
    for index in sorted({tops[key] for key in rest if key in tops} | searched):
        stmt = module.body[index]
        state = _MarkingCodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
        cst.Module(body=[stmt], default_newline=module.default_newline, default_indent=module.default_indent)._codegen(state)
        _shifted(_ranges(state, rest | {id(stmt)}), stmt, tree.body[firsts[index]].lineno, rest, by_id, out)
    if len(out) != len(by_id):
        raise _Unmapped
    return out


def _shifted(local: dict[int, CodeRange], stmt: cst.CSTNode, line: int, wanted: set[int], by_id: dict, out: dict) -> None:
    """The ranges of a statement generated alone, moved to the file's `line` where the statement starts."""
    shift = line - local[id(stmt)].start.line
    for key, rng in local.items():
        if key in wanted:
            out[by_id[key]] = CodeRange(
                CodePosition(rng.start.line + shift, rng.start.column), CodePosition(rng.end.line + shift, rng.end.column)
            )


def _place_in_statements(
    module: cst.Module, tree: ast.Module, firsts: list[int], tops: Mapping[int, int],
    inner: dict[int, tuple[cst.CSTNode, list[int]]], by_id: dict, out: dict,
) -> None:
    """Each statement of `inner` generated alone: its indentation is that of the blocks around it (so lines
    continued inside brackets come out as in the file), its line the one `ast` gives the same statement."""
    where: dict[int, tuple[ast.stmt, tuple[str, ...], bool]] = {}
    for index in sorted({tops[keys[0]] for _, keys in inner.values()}):
        stmt: cst.CSTNode = module.body[index]
        count = len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
        found: dict[int, tuple[ast.stmt, tuple[str, ...], bool]] = {}
        try:
            _pair([stmt], tree.body[firsts[index]:firsts[index] + count], (), module.default_indent, found)
        except _Unmapped:
            continue  # a shape this pairing does not know: that statement is generated whole
        where.update(found)
    for stmt, keys in inner.values():
        place = where.get(id(stmt))
        if place is None:
            continue
        node, indents, is_elif = place
        state = _MarkingCodegenState(
            default_indent=module.default_indent, default_newline=module.default_newline, indent_tokens=list(indents)
        )
        if is_elif:
            stmt._codegen(state, is_elif=True)
        else:
            stmt._codegen(state)
        wanted = set(keys)
        local = _ranges(state, wanted | {id(stmt)})
        if wanted <= local.keys():
            _shifted(local, stmt, node.lineno, wanted, by_id, out)


# libcst's compound statements and the `ast` statements they parse to
_AST_KINDS: dict[type, tuple[type[Any], ...]] = {
    cst.If: (ast.If,), cst.For: (ast.For, ast.AsyncFor), cst.While: (ast.While,),
    cst.With: (ast.With, ast.AsyncWith), cst.Try: (ast.Try,), cst.FunctionDef: (ast.FunctionDef, ast.AsyncFunctionDef),
    cst.ClassDef: (ast.ClassDef,), cst.Match: (ast.Match,),
}
if hasattr(ast, "TryStar"):  # Python 3.11
    _AST_KINDS[cst.TryStar] = (ast.TryStar,)


def _pair(stmts: Sequence[cst.CSTNode], nodes: Sequence[ast.stmt], indents: tuple[str, ...], default_indent: str,
          where: dict) -> None:
    """Each libcst statement of a block with its `ast` statement (a line `a; b` is two of them) and the
    indentation it is generated with; raises _Unmapped where the two trees do not line up."""
    i = 0
    for stmt in stmts:
        if i >= len(nodes):
            raise _Unmapped
        if isinstance(stmt, cst.SimpleStatementLine):
            where[id(stmt)] = (nodes[i], indents, False)
            i += len(stmt.body)
            continue
        if not isinstance(stmt, cst.BaseCompoundStatement):  # as _pair_compound would find (for the type checker)
            raise _Unmapped
        _pair_compound(stmt, nodes[i], indents, default_indent, where, False)
        i += 1
    if i != len(nodes):
        raise _Unmapped


def _pair_compound(stmt: cst.BaseCompoundStatement, node: ast.stmt, indents: tuple[str, ...], default_indent: str, where: dict,
                   is_elif: bool) -> None:
    if not isinstance(node, _AST_KINDS.get(type(stmt), ())):
        raise _Unmapped
    where[id(stmt)] = (node, indents, is_elif)
    blocks: list[tuple[cst.BaseSuite, list]] = [(stmt.body, node.body)] if not isinstance(stmt, cst.Match) else []
    if isinstance(stmt, cst.If) and isinstance(stmt.orelse, cst.If):
        if len(node.orelse) != 1:
            raise _Unmapped
        _pair_compound(stmt.orelse, node.orelse[0], indents, default_indent, where, True)
    elif isinstance(stmt, (cst.Try, cst.TryStar)):
        if len(stmt.handlers) != len(node.handlers):
            raise _Unmapped
        handlers: Sequence[cst.ExceptHandler | cst.ExceptStarHandler] = stmt.handlers
        blocks += [(h.body, n.body) for h, n in zip(handlers, node.handlers)]
        blocks += [(stmt.orelse.body, node.orelse)] if stmt.orelse is not None else []
        blocks += [(stmt.finalbody.body, node.finalbody)] if stmt.finalbody is not None else []
    elif isinstance(stmt, cst.Match):
        if len(stmt.cases) != len(node.cases):
            raise _Unmapped
        blocks += [(c.body, n.body) for c, n in zip(stmt.cases, node.cases)]
    elif (orelse := getattr(stmt, "orelse", None)) is not None:  # the `else:` of an if, a loop
        blocks.append((orelse.body, node.orelse))
    outer = indents
    if isinstance(stmt, cst.Match):  # its cases are indented under it, their blocks under them
        outer += (default_indent if stmt.indent is None else stmt.indent,)
    for block, body in blocks:
        if isinstance(block, cst.IndentedBlock):
            indent = default_indent if block.indent is None else block.indent
            _pair(block.body, body, outer + (indent,), default_indent, where)
        elif len(block.body) != len(body):  # `if x: a; b`: no statement of its own to generate
            raise _Unmapped


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

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        return _Syntactic(self.marks, self.tokens, node, start_node, end_node)


class _Syntactic:
    """The hook around a node's syntactic part: its token indexes noted on the way out, as a plain object (a
    generator-based context manager costs several times more, and libcst enters one per node it writes)."""

    __slots__ = ("marks", "tokens", "node", "start_node", "end_node", "start")

    def __init__(self, marks: dict, tokens: list, node, start_node, end_node) -> None:
        self.marks, self.tokens, self.node, self.start_node, self.end_node = marks, tokens, node, start_node, end_node
        self.start = 0

    def __enter__(self) -> None:
        self.start = len(self.tokens)

    def __exit__(self, *exc) -> None:
        marks = self.marks
        marks[id(self.node)] = (
            marks[id(self.start_node)][0] if self.start_node is not None else self.start,
            marks[id(self.end_node)][1] if self.end_node is not None else len(self.tokens),
        )


def _ranges(state: _MarkingCodegenState, wanted: set[int] | None) -> dict[int, CodeRange]:
    """The ranges of the nodes `state` generated (those in `wanted`, or all), keyed by id(), its first token at
    line 1, column 0."""
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
    }


def _ast_of(text: str) -> ast.Module | None:
    """The `ast` of the text, or None where CPython's parser does not take it."""
    # The cycle collector paused: it would walk the caller's libcst tree again and again while the ast is built
    # (most of the parse's time in a long file), to find cycles an ast does not have.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return pyast.parse(text.removeprefix("\ufeff"))  # CPython refuses a BOM in a str
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    finally:
        if enabled:
            gc.enable()


def _top_level_pairs(module: cst.Module, tree: ast.Module) -> list[int]:
    """For each top-level libcst statement, the index of its first `ast` statement (a libcst line `a; b` is two
    ast statements, every other statement one); `ast`'s line of it is where libcst's position starts (a
    decorated statement's at `def`/`class`, not at its first decorator)."""
    firsts: list[int] = []
    i = 0
    for stmt in module.body:
        if i >= len(tree.body):
            raise _Unmapped
        firsts.append(i)
        i += len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
    if i != len(tree.body):
        raise _Unmapped
    return firsts
