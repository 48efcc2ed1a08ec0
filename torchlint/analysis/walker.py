"""Tree to events: one walk over a module, by hand over statements (cheap) and with small visitors over
expressions, emits each function's (and the module body's) raw events in program order, each with its loops,
guards and contexts. The layers above classify them (`classify`), place helpers' events at their calls (`model`)
and answer questions over them (`scopes`, `loops`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import libcst as cst

from torchlint.analysis.events import AssignForm, CallVia, ClipVia, Event, EventKind, Guard, ZeroGradOf
from torchlint.analysis.exprs import container_name, dotted, is_self_accumulation, names_in
from torchlint.analysis.semantics import CLIP_FUNCTIONS, STEPPING_FUNCTIONS, STEPPING_LAST_NAMES, context_of
from torchlint.source.walk import calls_in_evaluation_order

# Method calls that may be events (a backward, a step, an append into a total ...): emitted as METHOD events and
# classified later, once the names' kinds are known.
TRACKED_METHODS = frozenset(
    """backward manual_backward grad step zero_grad update unscale_ clip_grad_norm_ clip_grad_value_ clip_grad_norm
    clamp_ append extend clear detach_ zero_ fill_""".split()
)
_Ctx = tuple  # (loops, guards, contexts)
# An augmented assignment's operator, by its libcst class name, as the form of its ASSIGN event.
_AUGMENTED = {"AddAssign": AssignForm.ADD, "DivideAssign": AssignForm.DIV, "MultiplyAssign": AssignForm.MUL,
              "SubtractAssign": AssignForm.SUB}


@dataclass(eq=False)
class RawScope:
    """A function (or the module body) as the walk leaves it: its raw events, in program order."""

    node: cst.CSTNode
    name: str
    class_name: str | None
    raw: list[Event] = field(default_factory=list)
    local_defs: dict[str, cst.CSTNode] = field(default_factory=dict)  # functions defined inside it
    body: Sequence[cst.CSTNode] = ()  # the statements the flow graph is built from
    params: dict[str, cst.Param] = field(default_factory=dict)


class EventWalker:
    """Walks statements by hand (cheap) and expressions with small visitors, emitting raw events.

    `project_modules`: names bound to modules of the project (a call through one may reach another file's
    function); `scope_type`: the class of the scopes it creates (the query layer's `Scope`)."""

    def __init__(self, project_modules: set[str] | frozenset[str], scope_type: type[RawScope] = RawScope,
                 module_files: set[str] | frozenset[str] = frozenset()) -> None:
        self.project_modules = project_modules
        self.module_files = module_files  # of them, those known to be files: `engine.step(...)` is engine.py's step
        self.scope_type = scope_type
        self.scopes: list[RawScope] = []  # in the order they are met: the module body first
        self.classes: dict[str, cst.ClassDef] = {}  # the file's classes by name (the first of a name)
        self.imported: set[str] = set()  # names bound by import statements
        self.imported_as: dict[str, str] = {}  # name bound by an import -> the full dotted name it stands for
        # id(node) -> index of the module-level statement holding it, for the nodes events point at
        # (positions are computed per module-level statement, see torchlint.source.positions).
        self.top_of: dict[int, int] = {}
        # id(node) -> the innermost statement holding it (the event's line), for the same nodes: where known, a
        # position is computed from that statement alone.
        self.statement_of: dict[int, cst.CSTNode] = {}
        self._top = 0  # index of the module-level statement being walked
        # method calls of objects (`trainer.step_batch(x)`): (scope, index in its raw events, the event it would
        # be, the METHOD event of the same call when its name is one of TRACKED_METHODS)
        self.object_calls: list[tuple[RawScope, int, Event, Event | None]] = []

    def walk_module(self, module: cst.Module) -> None:
        scope = self.scope_type(module, "<module>", None, body=module.body)
        self.scopes.append(scope)
        for index, stmt in enumerate(module.body):
            self._top = index
            self._stmt(scope, stmt, ((), (), ()))

    def _function(self, node: cst.FunctionDef, class_name: str | None, prefix: str) -> RawScope:
        body = node.body.body if type(node.body) is cst.IndentedBlock else [node.body]
        scope = self.scope_type(node, prefix + node.name.value, class_name, body=body)
        p = node.params
        for param in (*p.posonly_params, *p.params, *p.kwonly_params):
            scope.params[param.name.value] = param
        self.scopes.append(scope)
        contexts: tuple[str, ...] = ()
        for dec in node.decorators:
            d = dec.decorator.func if type(dec.decorator) is cst.Call else dec.decorator
            name = dotted(d) or ""
            ctx = context_of(name)
            if ctx:
                contexts += (ctx,)
        self._block(scope, body, ((), (), contexts))
        return scope

    def _block(self, scope: RawScope, stmts: Sequence[cst.CSTNode], ctx: _Ctx) -> None:
        for stmt in stmts:
            self._stmt(scope, stmt, ctx)

    def _body(self, scope: RawScope, node: cst.CSTNode, ctx: _Ctx) -> None:
        body = getattr(node, "body", None)
        if type(body) is cst.IndentedBlock:
            self._block(scope, body.body, ctx)
        elif type(body) is cst.SimpleStatementSuite:
            self._simple(scope, node, body.body, ctx)

    def _stmt(self, scope: RawScope, stmt: cst.CSTNode, ctx: _Ctx) -> None:
        loops, guards, contexts = ctx
        if type(stmt) is cst.SimpleStatementLine:
            self._simple(scope, stmt, stmt.body, ctx)
        elif type(stmt) is cst.If:
            self._exprs(scope, stmt, [stmt.test], ctx)
            g = Guard(stmt.test, False, len(loops))
            self._body(scope, stmt, (loops, guards + (g,), contexts))
            orelse = stmt.orelse
            neg = guards + (Guard(stmt.test, True, len(loops)),)
            if type(orelse) is cst.If:
                self._stmt(scope, orelse, (loops, neg, contexts))
            elif type(orelse) is cst.Else:
                self._body(scope, orelse, (loops, neg, contexts))
                self._drop_stand_ins(stmt.body, [orelse.body])
                self._drop_stand_ins(orelse.body, [stmt.body])
        elif type(stmt) is cst.For or type(stmt) is cst.While:
            head = [stmt.iter] if isinstance(stmt, cst.For) else [stmt.test]
            if type(stmt) is cst.For:
                self._assign_targets(scope, stmt, stmt.target, stmt.iter, ctx, AssignForm.FOR)
            self._exprs(scope, stmt, head, ctx)
            self._body(scope, stmt, (loops + (stmt,), guards, contexts))
            if stmt.orelse is not None:
                self._body(scope, stmt.orelse, ctx)
        elif type(stmt) is cst.With:
            added: tuple[str, ...] = ()
            for item in stmt.items:
                expr = item.item
                func = expr.func if type(expr) is cst.Call else expr
                name = dotted(func) or ""
                kind = context_of(name)
                if kind:
                    added += (kind,)
            self._exprs(scope, stmt, [i.item for i in stmt.items], ctx)
            for item in stmt.items:
                if item.asname is not None:  # `with amp.scale_loss(loss, opt) as scaled_loss:`
                    self._assign_targets(scope, stmt, item.asname.name, item.item, ctx, AssignForm.PLAIN)
            self._body(scope, stmt, (loops, guards, contexts + added))
        elif type(stmt) is cst.Try or type(stmt) is cst.TryStar:
            self._body(scope, stmt, ctx)
            for handler in stmt.handlers:
                self._body(scope, handler, (loops, guards + (Guard(handler, False, len(loops)),), contexts))
            self._drop_stand_ins(stmt.body, [h.body for h in stmt.handlers])
            if stmt.orelse is not None:
                self._body(scope, stmt.orelse, ctx)
            if stmt.finalbody is not None:
                self._body(scope, stmt.finalbody, ctx)
        elif type(stmt) is cst.FunctionDef:
            scope.local_defs[stmt.name.value] = stmt
            prefix = "" if type(scope.node) is cst.Module else scope.name + "."
            self._function(stmt, scope.class_name, prefix)
        elif type(stmt) is cst.ClassDef:
            self.classes.setdefault(stmt.name.value, stmt)
            for member in stmt.body.body if type(stmt.body) is cst.IndentedBlock else ():
                if type(member) is cst.FunctionDef:
                    self._function(member, stmt.name.value, "")
                else:
                    self._stmt(scope, member, ctx)
        elif type(stmt) is cst.Match:
            self._exprs(scope, stmt, [stmt.subject], ctx)
            for case in stmt.cases:
                self._body(scope, case, (loops, guards + (Guard(case, False, len(loops)),), contexts))

    def _drop_stand_ins(self, imports: cst.BaseSuite, others: Sequence[cst.BaseSuite]) -> None:
        """`try: from torch.cuda.amp import GradScaler` / `except ImportError: class GradScaler: ...` (or the two
        arms of an `if`): the class stands in for the import only where the import fails or is not taken; where
        the import runs, the name is the imported class. The stand-in does not name a class of the file (its
        `step()` is not what `scaler.step(opt)` runs)."""
        imported = {
            (alias.asname.name.value if alias.asname is not None and type(alias.asname.name) is cst.Name
             else dotted(alias.name))
            for line in imports.body if type(imports) is cst.IndentedBlock and type(line) is cst.SimpleStatementLine
            for small in line.body if isinstance(small, (cst.Import, cst.ImportFrom))
            for alias in (small.names if not isinstance(small.names, cst.ImportStar) else ())
        }
        for suite in others if imported else ():
            for member in suite.body if type(suite) is cst.IndentedBlock else ():
                if type(member) is cst.ClassDef and member.name.value in imported \
                        and self.classes.get(member.name.value) is member:
                    del self.classes[member.name.value]

    # -- simple statements ---------------------------------------------------------------------------------------
    def _simple(self, scope: RawScope, line: cst.CSTNode, smalls: Sequence[cst.CSTNode], ctx: _Ctx) -> None:
        for small in smalls:
            if type(small) is cst.Assign:
                self._exprs(scope, line, [small.value], ctx)
                for t in small.targets:
                    self._assign_targets(scope, line, t.target, small.value, ctx, AssignForm.PLAIN)
            elif type(small) is cst.AnnAssign:
                if small.value is not None:
                    self._exprs(scope, line, [small.value], ctx)
                    self._assign_targets(scope, line, small.target, small.value, ctx, AssignForm.PLAIN)
            elif type(small) is cst.AugAssign:
                self._exprs(scope, line, [small.value], ctx)
                op = small.operator.__class__.__name__
                form = _AUGMENTED.get(op, AssignForm.OTHER_OP)
                target = container_name(small.target)
                if target:
                    self._emit(scope, EventKind.ASSIGN, small, line, ctx, target=target, value=small.value, variant=form)
            elif type(small) is cst.Expr:
                self._exprs(scope, line, [small.value], ctx)
            elif type(small) is cst.Return and small.value is not None:
                self._exprs(scope, line, [small.value], ctx)
                self._emit(scope, EventKind.RETURN, small, line, ctx, value=small.value)
            elif (type(small) is cst.Import or type(small) is cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    bound = alias.asname.name if alias.asname is not None else alias.name
                    name = dotted(bound)
                    if name:
                        self.imported.add(name.split(".", 1)[0])
                        self._import_as(small, alias, name)
            elif type(small) is cst.Del:
                targets = small.target.elements if type(small.target) is cst.Tuple else [small.target]
                for el in targets:
                    node = el.value if type(el) is cst.Element else el
                    name = dotted(node)
                    if name:
                        self._emit(scope, EventKind.RESET, small, line, ctx, target=name)

    def _import_as(self, small: cst.Import | cst.ImportFrom, alias: cst.ImportAlias, bound: str) -> None:
        """What the name an import binds stands for, in full (`import a.b as x`: `a.b`; `from a import b`: `a.b`)."""
        full = dotted(alias.name)
        if full is None:
            return
        if type(small) is cst.Import:
            top = bound.split(".", 1)[0]  # `import a.b` binds `a`
            self.imported_as[bound if alias.asname is not None else top] = full if alias.asname is not None else top
        elif type(small) is cst.ImportFrom and not small.relative and small.module is not None and (
                module := dotted(small.module)):
            self.imported_as[bound] = f"{module}.{full}"

    def _assign_targets(
        self, scope: RawScope, line: cst.CSTNode, target: cst.BaseExpression, value: cst.BaseExpression, ctx: _Ctx,
        how: AssignForm,
    ) -> None:
        """ASSIGN events for `target = value` (`how` PLAIN) or `for target in value:` (`how` FOR)."""
        pairs = _paired(target, value) if how is AssignForm.PLAIN else None
        if pairs is not None:  # `total, n = total + loss, n + 1`: each name bound to its own item
            for t, v in pairs:
                self._assign_targets(scope, line, t, v, ctx, how)
            return
        if type(target) in (cst.Tuple, cst.List):
            for i, el in enumerate(_flatten(target)):
                name = dotted(el)
                if name:
                    form = how if how is AssignForm.FOR else (AssignForm.UNPACK_FIRST if i == 0 else AssignForm.UNPACK)
                    self._emit(scope, EventKind.ASSIGN, line, line, ctx, target=name, value=value, variant=form,
                               index=i)
            return
        name = dotted(target)
        if name is None:
            container = container_name(target)
            if container and how is AssignForm.PLAIN:
                # `d[k] = v` stores data in the container without rebinding it.
                self._emit(scope, EventKind.ASSIGN, line, line, ctx, target=container, value=value, variant=AssignForm.ITEM)
            return
        if name.endswith(".grad") and type(value) is cst.Name and value.value == "None":
            self._emit(scope, EventKind.ZERO_GRAD, line, line, ctx, target=name, variant=ZeroGradOf.PARAM)
            return
        if how is AssignForm.FOR:
            self._emit(scope, EventKind.ASSIGN, line, line, ctx, target=name, value=value, variant=AssignForm.FOR)
            return
        added = is_self_accumulation(name, value)
        if added is not None:
            self._emit(scope, EventKind.ASSIGN, line, line, ctx, target=name, value=added, variant=AssignForm.SELF_ADD)
        else:
            self._emit(scope, EventKind.ASSIGN, line, line, ctx, target=name, value=value, variant=AssignForm.PLAIN)

    def _exprs(self, scope: RawScope, line: cst.CSTNode, exprs: Iterable[cst.CSTNode], ctx: _Ctx) -> None:
        for expr in exprs:
            for call in calls_in_evaluation_order(expr):
                self._call(scope, line, call, ctx)

    def _call(self, scope: RawScope, line: cst.CSTNode, call: cst.Call, ctx: _Ctx) -> None:
        func = call.func
        if self.imported_as and (type(func) is cst.Attribute and func.attr.value in STEPPING_LAST_NAMES
                                 or type(func) is cst.Name and func.value in STEPPING_LAST_NAMES):
            head, _, rest = (dotted(func) or "").partition(".")
            full = self.imported_as.get(head, "") + (f".{rest}" if rest else "")
            if full in STEPPING_FUNCTIONS:  # `xm.optimizer_step(optimizer)`: a library function that steps it
                self._emit(scope, EventKind.METHOD, call, line, ctx, callee=full)
                return
        if type(func) is cst.Attribute:
            method = func.attr.value
            if method == "add_" and call.args and call.args[0].keyword is None and not call.args[0].star \
                    and (held := dotted(func.value)):
                # `total.add_(loss)` adds into `total` in place, as `total += loss` does
                self._emit(scope, EventKind.ASSIGN, call, line, ctx, target=held, value=call.args[0].value,
                           variant=AssignForm.ADD)
            if type(func.value) is cst.Name and func.value.value in self.module_files:
                # `engine.step(model, optimizer, loss)`: a function of another file, not an optimizer's step
                self._emit(scope, EventKind.LOCAL_CALL, call, line, ctx, callee=dotted(func), variant=CallVia.MODULE)
                return
            if method in TRACKED_METHODS:
                if method == "step" and call.args:
                    closure = call.args[0].value
                    if type(closure) is cst.Name:
                        self._emit(scope, EventKind.LOCAL_CALL, call, line, ctx, callee=closure.value, variant=CallVia.CLOSURE)
                    elif type(closure) is cst.Lambda:
                        self._exprs(scope, line, [closure.body], ctx)
                    elif type(closure) is cst.Call and (factory := dotted(closure.func)) is not None:
                        # `optimizer.step(self.make_closure(x, y))`: the closure a function of the file returns
                        self._emit(scope, EventKind.LOCAL_CALL, call, line, ctx, callee=factory, variant=CallVia.FACTORY)
                self._emit(scope, EventKind.METHOD, call, line, ctx)
                if not (type(func.value) is cst.Name and func.value.value == "self"):
                    # `self.updater.update(batch)` may be a method of an object of known class, where its name
                    # means nothing to the classification (it is not a GradScaler's update)
                    self._object_call(scope, call, line, ctx, scope.raw[-1])
                    return
                # `self.clear()` / `self.step()` may be methods of this class: follow them too.
            name = dotted(func)
            if name and name.startswith("self.") and name.count(".") == 1:
                self._emit(scope, EventKind.LOCAL_CALL, call, line, ctx, callee=name)
            elif name and name.split(".", 1)[0] in self.project_modules:
                # `engine.train_one_epoch(...)`: a function of another file of the project, resolved on expansion
                self._emit(scope, EventKind.LOCAL_CALL, call, line, ctx, callee=name, variant=CallVia.MODULE)
            else:
                self._object_call(scope, call, line, ctx, None)
        elif type(func) is cst.Name:
            if func.value in CLIP_FUNCTIONS:
                self._emit(scope, EventKind.CLIP, call, line, ctx, variant=ClipVia.TORCH)
            else:
                self._emit(scope, EventKind.LOCAL_CALL, call, line, ctx, callee=func.value)

    def _object_call(self, scope: RawScope, call: cst.Call, line: cst.CSTNode, ctx: _Ctx, method: Event | None) -> None:
        """`trainer.train_step(x)`, `self.updater.step(x)`: a method of an object whose class is known only once the
        walk is done (receivers); kept aside with its place and the METHOD event of the same call, if any."""
        name = dotted(call.func)
        if name and (name.count(".") == 1 and not name.startswith("self.") and name.split(".", 1)[0]
                     not in self.imported or name.count(".") == 2 and name.startswith("self.")):
            event = self._event(scope, EventKind.LOCAL_CALL, call, line, ctx, callee=name, variant=CallVia.OBJECT)
            self.object_calls.append((scope, len(scope.raw), event, method))

    def _emit(self, scope: RawScope, kind: EventKind, node: cst.CSTNode, line: cst.CSTNode, ctx: _Ctx, **kw) -> None:
        scope.raw.append(self._event(scope, kind, node, line, ctx, **kw))

    def _event(self, scope: RawScope, kind: EventKind, node: cst.CSTNode, line: cst.CSTNode, ctx: _Ctx, **kw) -> Event:
        loops, guards, contexts = ctx
        event = Event.at(kind, node, line, scope.node, loops, guards, contexts, path=(line,), **kw)
        top, stmt = self.top_of, self.statement_of
        top[id(node)] = top[id(line)] = self._top
        stmt[id(node)] = stmt[id(line)] = line
        if event.value is not None:
            top[id(event.value)] = self._top
            stmt[id(event.value)] = line
        return event


def _paired(target: cst.BaseExpression, value: cst.BaseExpression) -> list[tuple[cst.BaseExpression, cst.BaseExpression]] | None:
    """`a, b = x, y` as `a = x` and `b = y`: items written out on both sides, as many, none starred, each a name or
    attribute, and no item reading a name bound by another (`a, b = b, a` is not two assignments in a row)."""
    if type(target) not in (cst.Tuple, cst.List) or type(value) not in (cst.Tuple, cst.List):
        return None
    names = [el.value for el in target.elements]  # type: ignore[attr-defined]  # a Tuple or List (above)
    items = value.elements  # type: ignore[attr-defined]
    if len(names) != len(items) or any(type(el) is not cst.Element for el in (*target.elements, *items)):  # type: ignore[attr-defined]
        return None
    bound = [dotted(n) for n in names]
    if any(b is None for b in bound):
        return None
    for i, item in enumerate(items):
        read = names_in(item.value)
        if any(b in read for j, b in enumerate(bound) if j != i):
            return None
    return [(n, item.value) for n, item in zip(names, items)]


def _flatten(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`a, (b, c)` -> [a, b, c]; starred names included."""
    if type(target) is cst.Tuple or type(target) is cst.List:
        return [n for el in target.elements for n in _flatten(el.value)]
    if type(target) is cst.StarredElement:
        return [target.value]
    return [target]


def tracked_call(call: cst.Call) -> bool:
    """A call the model already understands (`scaler.step(opt)`, `opt.zero_grad()`), not an unknown helper."""
    return type(call.func) is cst.Attribute and call.func.attr.value in TRACKED_METHODS
