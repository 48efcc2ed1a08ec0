"""The flow graph of one scope: statements as nodes, edges in execution order, loops with back edges.

Built once per function (and for the module body) from the libcst statements; queried backwards and forwards by
the model and the rules (can B run after A in the same iteration? which definitions reach this use?), the way
pyright's binder builds flow nodes once and its checker walks them.

Granularity is the statement: a simple statement line is one node; a compound statement has a header node (the
`if` test, the loop head, the `with` items, the `try`, the `match` subject) that holds what its header evaluates.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import libcst as cst

ENTRY = 0
EXIT = 1


class FlowGraph:
    def __init__(self, body: Sequence[cst.CSTNode]) -> None:
        self.succ: list[list[int]] = [[], []]  # ENTRY, EXIT
        self.pred: list[list[int]] = [[], []]
        self.node_of: dict[int, int] = {}  # id(statement) -> node
        self.loop_head: dict[int, int] = {}  # id(for/while) -> its head node
        self.loop_nodes: dict[int, frozenset[int]] = {}  # head node -> the nodes of its body (head included)
        self._loops: list[tuple[int, list[int]]] = []  # (head, breaks)
        self._try_nodes: list[list[int]] | None = None
        self._reach_cache: dict[tuple[int, int], frozenset[int]] = {}
        self.exceptional: set[tuple[int, int]] = set()  # edges taken only when a statement raises
        exits = self._block(body, [ENTRY])
        self._link(exits, EXIT)

    # -- construction --------------------------------------------------------------------------------------------
    def _new(self, stmt: cst.CSTNode) -> int:
        n = len(self.succ)
        self.succ.append([])
        self.pred.append([])
        self.node_of[id(stmt)] = n
        if self._try_nodes is not None:
            self._try_nodes[-1].append(n)
        return n

    def _edge(self, a: int, b: int) -> None:
        if b not in self.succ[a]:
            self.succ[a].append(b)
            self.pred[b].append(a)

    def _link(self, froms: Iterable[int], to: int) -> None:
        for a in froms:
            self._edge(a, to)

    def _block(self, stmts: Sequence[cst.CSTNode], preds: list[int]) -> list[int]:
        for stmt in stmts:
            preds = self._stmt(stmt, preds)
        return preds

    def _suite(self, node: cst.CSTNode, preds: list[int]) -> list[int]:
        body = getattr(node, "body", None)
        if type(body) is cst.IndentedBlock:
            return self._block(body.body, preds)
        if type(body) is cst.SimpleStatementSuite:
            return self._simple(node, body.body, preds)
        return preds

    def _simple(self, stmt: cst.CSTNode, smalls: Sequence[cst.CSTNode], preds: list[int]) -> list[int]:
        n = self._new(stmt)
        self._link(preds, n)
        for small in smalls:
            if type(small) in (cst.Return, cst.Raise):
                self._edge(n, EXIT)
                return []
            if type(small) is cst.Break and self._loops:
                self._loops[-1][1].append(n)
                return []
            if type(small) is cst.Continue and self._loops:
                self._edge(n, self._loops[-1][0])
                return []
        return [n]

    def _stmt(self, stmt: cst.CSTNode, preds: list[int]) -> list[int]:
        if type(stmt) is cst.SimpleStatementLine:
            return self._simple(stmt, stmt.body, preds)
        if type(stmt) is cst.If:
            test = self._new(stmt)
            self._link(preds, test)
            exits = self._suite(stmt, [test])
            orelse = stmt.orelse
            if type(orelse) is cst.If:
                return exits + self._stmt(orelse, [test])
            if type(orelse) is cst.Else:
                return exits + self._suite(orelse, [test])
            return exits + [test]
        if type(stmt) is cst.For or type(stmt) is cst.While:
            head = self._new(stmt)
            self.loop_head[id(stmt)] = head
            self._link(preds, head)
            first = len(self.succ)
            self._loops.append((head, []))
            body_exits = self._suite(stmt, [head])
            _, breaks = self._loops.pop()
            self._link(body_exits, head)
            self.loop_nodes[head] = frozenset([head, *range(first, len(self.succ))])
            endless = type(stmt) is cst.While and _always_true(stmt.test)
            exits = [] if endless else [head]
            if stmt.orelse is not None:
                exits = self._suite(stmt.orelse, exits)
            return exits + breaks
        if type(stmt) is cst.With:
            head = self._new(stmt)
            self._link(preds, head)
            return self._suite(stmt, [head])
        if type(stmt) is cst.Try or type(stmt) is cst.TryStar:
            head = self._new(stmt)
            self._link(preds, head)
            outer = self._try_nodes
            self._try_nodes = (outer or []) + [[head]]
            body_exits = self._suite(stmt, [head])
            raising = self._try_nodes.pop()
            self._try_nodes = outer
            if outer is not None:
                outer[-1].extend(raising)
            exits = []
            for handler in stmt.handlers:
                # Any statement of the body may raise: each handler can follow each of them.
                first = len(self.succ)
                exits += self._suite(handler, list(raising))
                self.exceptional.update((r, first) for r in raising)
            exits += self._suite(stmt.orelse, body_exits) if stmt.orelse is not None else body_exits
            if stmt.finalbody is not None:
                first = len(self.succ)
                exits = self._suite(stmt.finalbody, exits + raising)
                self.exceptional.update((r, first) for r in raising if r not in exits)
            return exits
        if type(stmt) is cst.Match:
            head = self._new(stmt)
            self._link(preds, head)
            exits = [head]
            for case in stmt.cases:
                exits += self._suite(case, [head])
            return exits
        if type(stmt) is cst.ClassDef:
            n = self._new(stmt)
            self._link(preds, n)
            return self._suite(stmt, [n])
        # def, and anything else: one node, falls through
        n = self._new(stmt)
        self._link(preds, n)
        return [n]

    # -- queries -------------------------------------------------------------------------------------------------
    def node(self, stmt: cst.CSTNode) -> int | None:
        return self.node_of.get(id(stmt))

    def in_loop(self, node: int, loop: cst.CSTNode) -> bool:
        head = self.loop_head.get(id(loop))
        return head is not None and node in self.loop_nodes[head]

    def forward(self, start: int, loop: cst.CSTNode | None = None) -> frozenset[int]:
        """Nodes reachable from `start` by at least one edge; with `loop`, only within one iteration of it (the
        walk stops at the loop head, where the next iteration begins, and at the loop's exits)."""
        head = self.loop_head.get(id(loop)) if loop is not None else None
        key = (start, -1 if head is None else head)
        cached = self._reach_cache.get(key)
        if cached is not None:
            return cached
        inside = self.loop_nodes.get(head) if head is not None else None
        seen: set[int] = set()
        todo = list(self.succ[start])
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            if inside is not None and (n == head or n not in inside):
                continue
            seen.add(n)
            todo.extend(self.succ[n])
        result = self._reach_cache[key] = frozenset(seen)
        return result

    def may_follow(self, a: int, b: int, loop: cst.CSTNode | None = None) -> bool:
        """Can node `b` run after node `a` (in the same iteration of `loop`, when given)?"""
        return b in self.forward(a, loop)

    def reaches_avoiding(self, start: int, target: int, avoid: frozenset[int], normal_only: bool = False) -> bool:
        """Is there a path from `start` to `target` (at least one edge) that passes through none of `avoid`?
        With `normal_only`, paths that need a statement to raise do not count."""
        seen: set[int] = set()
        todo = [n for n in self.succ[start] if not (normal_only and (start, n) in self.exceptional)]
        while todo:
            n = todo.pop()
            if n == target:
                return True
            if n in seen or n in avoid:
                continue
            seen.add(n)
            todo.extend(m for m in self.succ[n] if not (normal_only and (n, m) in self.exceptional))
        return False

    def every_pass_meets(self, loop: cst.CSTNode, avoid: frozenset[int]) -> bool:
        """Does every pass of `loop`'s body meet a node of `avoid` before it goes round (`continue` included) or
        leaves (`break`)? Paths that need a statement to raise do not count."""
        head = self.loop_head.get(id(loop))
        if head is None:
            return False
        inside = self.loop_nodes[head]
        seen: set[int] = set()
        todo = [n for n in self.succ[head] if n in inside]
        while todo:
            n = todo.pop()
            if n in avoid or n in seen:
                continue
            if n == head or n not in inside:
                return False
            seen.add(n)
            todo.extend(m for m in self.succ[n] if (n, m) not in self.exceptional)
        return True

    def backward(
        self, start: int, stops: frozenset[int], memo: dict[int, tuple[frozenset[int], bool]]
    ) -> tuple[frozenset[int], bool]:
        """Walk predecessors from `start` (excluded), stopping at the nodes of `stops`: the stop nodes reached,
        and whether the entry was reached on some path that met no stop (see `walk_back`; `memo` is kept per set
        of stops)."""
        return walk_back(self.pred, start, stops, memo)


def walk_back(
    pred: list[list[int]], start: int, stops: frozenset[int], memo: dict[int, tuple[frozenset[int], bool]]
) -> tuple[frozenset[int], bool]:
    """The nodes of `stops` met walking predecessors from `start` (excluded), and whether the entry is met on a
    path with no stop. Every node the walk expands gets its own answer in `memo` (one per name: the stops are that
    name's definitions), so a later walk that meets it stops there: a chain of N definitions reading a name defined
    before them costs N steps in all, not N per definition. Nodes on a cycle share one answer (each reaches all the
    others), found as strongly connected components (Tarjan's algorithm, without recursion)."""
    if start in memo:
        return memo[start]
    index: dict[int, int] = {start: 0}
    low: dict[int, int] = {start: 0}
    found: dict[int, set[int]] = {start: set()}
    entry: dict[int, bool] = {start: False}
    stack, on_stack = [start], {start}
    work = [(start, iter(pred[start]))]
    while work:
        v, todo = work[-1]
        for p in todo:
            if p in stops:
                found[v].add(p)
            elif p == ENTRY:
                entry[v] = True
            elif p in memo:
                found[v] |= memo[p][0]
                entry[v] = entry[v] or memo[p][1]
            elif p not in index:
                index[p] = low[p] = len(index)
                found[p], entry[p] = set(), False
                stack.append(p)
                on_stack.add(p)
                work.append((p, iter(pred[p])))
                break
            elif p in on_stack:
                low[v] = min(low[v], index[p])  # same component: its answer is merged when the component closes
        else:
            work.pop()
            if low[v] == index[v]:  # v roots a component: all its nodes have the same answer
                members, reached, meets = [], set(), False
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    members.append(m)
                    reached |= found.pop(m)
                    meets = meets or entry.pop(m)
                    if m == v:
                        break
                answer = (frozenset(reached), meets)
                for m in members:
                    memo[m] = answer
                if work:
                    u = work[-1][0]
                    found[u] |= reached
                    entry[u] = entry[u] or meets
            elif work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
    return memo[start]


def _always_true(test: cst.BaseExpression) -> bool:
    return (type(test) is cst.Name and test.value == "True") or (
        type(test) is cst.Integer and test.value not in ("0",)
    )
