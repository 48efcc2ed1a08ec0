"""Stage 6: fixes applied to the tree (node replacement by identity), and the text edits they make."""

from __future__ import annotations

import dataclasses
import difflib
from typing import Mapping, Sequence, cast

import libcst as cst

from torchlint.diagnostic import Edit, Fix
from torchlint.source.lines import END_BREAK, breaks_before, split_lines


def apply_fixes(module: cst.Module, fixes: Sequence[Fix]) -> cst.Module:
    changes = {id(old): new for fix in fixes for old, new in fix.changes}
    return module.visit(_Replacer(changes))


class _Replacer(cst.CSTTransformer):
    def __init__(self, changes: Mapping[int, object]) -> None:
        self.changes = changes

    def on_leave(self, original_node, updated_node):
        return self.changes.get(id(original_node), updated_node)


def edits(before: str, after: str) -> tuple[Edit, ...]:
    """Line-granular text edits turning `before` into `after`."""
    a, b = split_lines(before, keepends=True), split_lines(after, keepends=True)
    edits = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            edits.append(Edit(i1 + 1, 1, i2 + 1, 1, "".join(b[j1:j2])))
    return tuple(edits)


class LocalEdits:
    """The text edits of one fix, computed on the top-level statements it touches only: applying a fix to the
    whole module and diffing the whole file costs a full code generation and a diff of every line, per finding
    (a minute on a 20,000-line file with many findings)."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._top: dict[int, int] | None = None
        self._start_lines: list[int] | None = None
        self._before: dict[tuple[int, int], str] = {}
        self._after: dict[tuple[int, int, tuple[int, ...]], str] = {}  # `fix_source` checks a fix, then writes it

    def _index(self) -> None:
        from torchlint.source.walk import walk

        module = self.module
        self._top = {}
        for index, stmt in enumerate(module.body):
            for node in walk(stmt, descend_scopes=True):
                self._top[id(node)] = index
        # Line of each top-level statement (its leading comments and blank lines included) in module.code,
        # which is the header, then each statement's code, then the footer.
        line = sum(_breaks(module.code_for_node(empty)) for empty in module.header)
        starts = []
        for stmt in module.body:
            starts.append(line + 1)
            line += _breaks(module.code_for_node(stmt))
        self._start_lines = starts

    def region(self, fix: Fix) -> tuple[int, int] | None:
        """The first and last top-level statements the fix touches; None when it touches something outside them."""
        if self._top is None:
            self._index()
        assert self._top is not None
        indexes = {self._top.get(id(old)) for old, _ in fix.changes}
        if not indexes or None in indexes:
            return None
        tops = cast("set[int]", indexes)  # None was ruled out just above
        return min(tops), max(tops)

    def _sub(self, first: int, last: int) -> cst.Module:
        module = self.module
        final = last == len(module.body) - 1
        return module.with_changes(
            body=module.body[first : last + 1], header=(), footer=module.footer if final else (),
            has_trailing_newline=module.has_trailing_newline if final else True,
        )

    def before(self, first: int, last: int) -> str:
        """The code of the top-level statements first..last (their leading lines, and the footer after the last)."""
        before = self._before.get((first, last))
        if before is None:
            before = self._before[(first, last)] = self._sub(first, last).code
        return before

    def after(self, first: int, last: int, fixes: Sequence[Fix]) -> str:
        """The code of the top-level statements first..last with the fixes applied."""
        key = (first, last, tuple(id(fix) for fix in fixes))
        after = self._after.get(key)
        if after is None:
            sub = self._sub(first, last)
            try:
                for fix in fixes:
                    sub = _replace_along_paths(sub, fix)
                after = sub.code
            except Exception:  # a replacement path cannot take (a sentinel where a node must be): the transformer can
                after = apply_fixes(self._sub(first, last), fixes).code
            self._after[key] = after
        return after

    def start_line(self, index: int) -> int:
        """The 1-based line where top-level statement `index` starts (its leading lines included)."""
        if self._start_lines is None:
            self._index()
        assert self._start_lines is not None
        return self._start_lines[index]

    def edits(self, fix: Fix) -> tuple[Edit, ...] | None:
        """None when the fix touches something outside the top-level statements (the caller diffs the file)."""
        span = self.region(fix)
        if span is None:
            return None
        first, last = span
        offset = self.start_line(first) - 1
        return tuple(
            Edit(e.line + offset, e.column, e.end_line + offset, e.end_column, e.content)
            for e in edits(self.before(first, last), self.after(first, last, [fix]))
        )

    def apply(self, text: str, fixes: Sequence[Fix]) -> str | None:
        """`text` (the module's code) with the fixes applied, each group of fixes on the top-level statements it
        touches only; None when a fix touches something outside them, two groups' statements overlap, or the
        statements' code is not the text's (the caller applies the fixes to the whole module)."""
        groups: dict[tuple[int, int], list[Fix]] = {}
        for fix in fixes:
            span = self.region(fix)
            if span is None:
                return None
            groups.setdefault(span, []).append(fix)
        spans = sorted(groups)
        if any(a[1] >= b[0] for a, b in zip(spans, spans[1:])):
            return None
        lines = split_lines(text, keepends=True)
        out: list[str] = []
        done = 0  # lines of `text` already copied or replaced
        for first, last in spans:
            start = self.start_line(first) - 1
            before = self.before(first, last)
            end = start + _breaks(before) + (0 if END_BREAK.search(before) else 1)
            if "".join(lines[start:end]) != before:
                return None
            out.extend(lines[done:start])
            out.append(self.after(first, last, groups[(first, last)]))
            done = end
        out.extend(lines[done:])
        return "".join(out)


def _breaks(text: str) -> int:
    return breaks_before(text, len(text))


class _NotFound(Exception):
    pass


def _replace_along_paths(root: cst.CSTNode, fix: Fix) -> cst.Module:
    """Apply each replacement by rebuilding only the nodes on the path from the root to the replaced node (a
    transformer would rebuild every node of the tree)."""
    for old, new in fix.changes:
        root = _replace(root, old, new)
    return root  # type: ignore[return-value]  # replacing inside a Module gives a Module back


def _replace(root: cst.CSTNode, old: cst.CSTNode, new) -> cst.CSTNode:
    from torchlint.source.walk import children

    parent: dict[int, cst.CSTNode] = {}
    stack = [root]
    found = False
    while stack and not found:
        node = stack.pop()
        for child in children(node):
            parent[id(child)] = node
            if child is old:
                found = True
                break
            stack.append(child)
    if not found:
        raise _NotFound
    child, replacement = old, new
    while child is not root:
        node = parent[id(child)]
        replacement = _with_child(node, child, replacement)
        child = node
    return replacement


def _with_child(node: cst.CSTNode, child: cst.CSTNode, new) -> cst.CSTNode:
    for field in dataclasses.fields(node):
        value = getattr(node, field.name)
        if value is child:
            if not isinstance(new, cst.CSTNode):
                raise _NotFound  # a sentinel outside a sequence
            return node.with_changes(**{field.name: new})
        if isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                if item is child:
                    if isinstance(new, cst.FlattenSentinel):
                        items = [*value[:i], *new.nodes, *value[i + 1:]]
                    elif new is cst.RemovalSentinel.REMOVE:
                        items = [*value[:i], *value[i + 1:]]
                    else:
                        items = [*value[:i], new, *value[i + 1:]]
                    return node.with_changes(**{field.name: tuple(items) if isinstance(value, tuple) else items})
    raise _NotFound
