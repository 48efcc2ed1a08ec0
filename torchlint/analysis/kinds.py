"""Value kinds: what a value is, per definition, from literals, known APIs, arithmetic, contexts, annotations and
the summaries of the file's own functions. Rules ask `model.kinds.of(expr, scope, at)`; UNKNOWN means "do not
guess", and a rule that needs a kind stays silent on UNKNOWN.
"""

from __future__ import annotations

import libcst as cst

from torchlint.analysis import containers, semantics as sem
from torchlint.analysis.answers import Answers, question
from torchlint.analysis.events import AssignForm, Event, EventKind
from torchlint.analysis.exprs import argument_for, dotted, last_part, positional_params
from torchlint.analysis.foreign import Resolved
from torchlint.analysis.lookup import FileLookup
from torchlint.analysis.names import Role
from torchlint.analysis.passing import graph_params, handed_plain_objects
from torchlint.analysis.scopes import Scope
from torchlint.analysis.vkind import VKind, arith, join

_CYCLE = VKind.CYCLE
_MAX_DEPTH = 6


class KindInference(Answers):
    """Infers the kind (`VKind`) of values and of functions' returns, remembering final answers (`answers`)."""

    def __init__(self, model: FileLookup) -> None:
        super().__init__()
        self.model = model
        self._defs: dict[int, VKind] = {}
        self._returns: dict[int, VKind] = {}
        self._comprehensions = containers.ComprehensionNames()

    # The items of torchlint.analysis.answers: a definition (d, scope), or a callee's returns (None, scope).
    def _known(self, item: tuple[Event | None, Scope]) -> bool:
        d, scope = item
        return id(scope.node) in self._returns if d is None else id(d) in self._defs

    def _ask(self, item: tuple[Event | None, Scope]) -> None:
        d, scope = item
        if d is None:
            self.returns(scope)
        else:
            self.of_def(d, scope)

    # -- public --------------------------------------------------------------------------------------------------
    @question
    def of(self, expr: cst.BaseExpression, scope: Scope, at: Event | None, depth: int = 0) -> VKind:
        """The kind of `expr` evaluated in `scope` where `at` happens (None: anywhere in the scope)."""
        if depth > _MAX_DEPTH:
            self._cut()  # the definition being computed is answered again on its own
            return VKind.UNKNOWN
        no_grad = at is not None and "no_grad" in at.contexts
        kind = self._expr(expr, scope, at, depth)
        if kind is _CYCLE:
            return VKind.UNKNOWN
        if kind is VKind.GRAPH and no_grad:
            return VKind.TENSOR
        return kind

    @question
    def of_name(self, name: str, scope: Scope, at: Event | None, depth: int = 0) -> VKind:
        if at is None:
            defs: tuple[Event, ...] = tuple(a for a in scope.assignments(name) if a.rebinds)
            entry = not defs
        else:
            defs, entry = scope.reaching(name, at)
        pairs = [(d, k) for d in defs if (k := self.of_def(d, scope, depth + 1)) is not _CYCLE]
        kinds = [k for _, k in pairs]
        if entry:
            outside = self._from_outside(name, scope, depth)
            if outside is VKind.UNKNOWN and not defs and sem.is_loss_name(name) and not self._callable(name, scope):
                outside = VKind.GRAPH  # a loss handed in as a parameter: by convention, a graph tensor
            kinds.append(outside)
        if not kinds:
            return _CYCLE if defs else VKind.UNKNOWN
        if set(kinds) == {VKind.NUMBER, VKind.GRAPH} and all(d.accumulates for d, k in pairs if k is VKind.GRAPH):
            # `total = 0`, then `total += loss` over a loop: a number only while nothing was added, then a graph
            return VKind.GRAPH
        if set(kinds) == {VKind.TENSOR, VKind.GRAPH}:
            # one branch builds the value with grad, another without (`with torch.no_grad():` for evaluation, a
            # `.detach()` by an option): on the path that builds it with grad it carries the graph
            return VKind.GRAPH
        return containers.written(self, name, scope, at, depth) if (kind := join(kinds)) is VKind.TENSOR and at else kind

    def _callable(self, name: str, scope: Scope) -> bool:
        """A name that holds a function, not a value: imported (`from loss import my_loss`), named like a function
        or a criterion (`loss_fn`, `self.loss_func`), or called in the scope (`adv_loss(x)`)."""
        return (name.split(".", 1)[0] in self.model.imported or sem.is_callable_name(name)
                or sem.is_module_name(name) or name in scope.called_names())

    @question
    def of_def(self, d: Event, scope: Scope, depth: int = 0) -> VKind:
        """The kind a definition gives its target."""
        cached = self._defs.get(id(d))
        if cached is not None:
            return cached
        if id(d) in self._open:
            self._assumed(id(d))
            return _CYCLE  # the value comes round the loop to itself: the other definitions decide
        if depth > _MAX_DEPTH:
            self._cut((d, scope))
            return VKind.UNKNOWN
        frame = self._enter(id(d), (d, scope))
        try:
            kind = self._def(d, scope, depth)
        finally:
            self._leave(id(d))
        if self._may_remember(id(d), frame):
            self._defs[id(d)] = kind
        return kind

    @question
    def returns(self, callee: Scope, depth: int = 0) -> VKind:
        """The function summary's return kind: the join of what its `return` statements give."""
        key = id(callee.node)
        cached = self._returns.get(key)
        if cached is not None:
            return cached
        if key in self._open:
            self._assumed(key)
            return VKind.UNKNOWN
        if depth > _MAX_DEPTH:
            self._cut((None, callee))
            return VKind.UNKNOWN
        frame = self._enter(key, (None, callee))
        try:
            rets = callee.own_returns()
            # a value the function back-propagates before returning it carries a graph, whoever built it
            kind = join(VKind.GRAPH if found is VKind.UNKNOWN and e.value is not None and callee.backpropagated_before(
                e.value, e) else found for e in rets for found in (self.of(e.value, callee, e, depth + 1),))
            if not rets:  # (a method whose body only says it is to be overridden returns what the override does)
                kind = VKind.UNKNOWN if callee.class_name and _placeholder(callee.node) else VKind.NONE
        finally:
            self._leave(key)
        if self._may_remember(key, frame):
            self._returns[key] = kind
        return kind

    # -- definitions ---------------------------------------------------------------------------------------------
    def _def(self, d: Event, scope: Scope, depth: int) -> VKind:
        if d.kind is EventKind.RESET:
            return VKind.TENSOR if type(d.node) is cst.Call else VKind.NONE  # detach_() / del, clear()
        value = d.value
        if value is None:
            return VKind.UNKNOWN
        if d.variant is AssignForm.FOR:
            return self._element_of_iterable(value, scope, d, depth)
        whole = self.of(value, scope, d, depth)
        if d.variant in (AssignForm.UNPACK_FIRST, AssignForm.UNPACK):
            element = self._element(value, d.index, scope, d, depth)
            if element is not None and element is not VKind.UNKNOWN:
                return element
            if whole is VKind.GRAPH and d.target and sem.is_loss_name(d.target):
                return VKind.GRAPH  # `loss, logs = model(batch)`
            return VKind.UNKNOWN  # what else a forward returns beside the loss (a count, a dict) is not known
        if d.variant in (AssignForm.ADD, AssignForm.SELF_ADD, AssignForm.SUB, AssignForm.MUL, AssignForm.DIV):
            # the total keeps what it held, combined with the added value
            old = self.of_name(d.target or "", scope, d, depth) if d.target else VKind.UNKNOWN
            return whole if old is _CYCLE else arith(old, whole)
        return whole

    def _element(self, value: cst.BaseExpression, index: int, scope: Scope, at: Event, depth: int) -> VKind | None:
        return containers.element(self, value, index, scope, at, depth)

    def _element_of_iterable(self, it: cst.BaseExpression, scope: Scope, at: Event, depth: int) -> VKind:
        return containers.element_of_iterable(self, it, scope, at, depth)

    def _from_outside(self, name: str, scope: Scope, depth: int) -> VKind:
        """A name that reaches the scope from its entry: a parameter, a global, or an attribute of `self`."""
        param = scope.params.get(name)
        if param is not None:
            kind = self._param(name, param)
            # named like a module, but handed instances of a plain class, or one that back-propagates by hand
            # (`model.backward(x, yhat, y)`: an nn.Module has no such method)
            return VKind.UNKNOWN if kind is VKind.MODULE and (f"{name}.backward" in scope.called_names() or
                                                              handed_plain_objects(self.model, scope, name)) else kind
        model = self.model
        if name.startswith("self.") and scope.class_name is not None:
            defs = [
                (a, s)
                for s in model.scopes
                if s.class_name == scope.class_name
                for a in s.assignments(name)
                if a.rebinds
            ]
            if defs:
                return join(self.of_def(a, s, depth + 1) for a, s in defs)
            return self._conventional(name)
        if "." in name:
            return self._conventional(name)
        module = model.scopes[0]
        if scope is not module:
            defs2 = [a for a in module.assignments(name) if a.rebinds]
            if defs2:
                return join(self.of_def(a, module, depth + 1) for a in defs2)
        return self._conventional(name)

    def _param(self, name: str, param: cst.Param) -> VKind:
        ann = param.annotation
        if ann is not None:
            text = dotted(ann.annotation) or ""
            last = last_part(text)
            if last in ("int", "float", "bool"):
                return VKind.NUMBER
            if last in ("str", "Path"):
                return VKind.STRING
            if last == "Module":
                return VKind.MODULE
        default = param.default
        if type(default) in (cst.SimpleString, cst.FormattedString):
            return VKind.STRING
        if type(default) in (cst.Integer, cst.Float) or (
            type(default) is cst.Name and default.value in ("True", "False")
        ):
            return VKind.NUMBER
        return self._conventional(name)

    def _conventional(self, name: str) -> VKind:
        if name in self.model.imported:
            return VKind.UNKNOWN  # a function, class or module imported from elsewhere
        if sem.is_module_name(name):
            return VKind.MODULE
        if self.model.symbols.role(name) is not Role.OTHER:
            return VKind.OBJECT
        return VKind.UNKNOWN

    # -- expressions ---------------------------------------------------------------------------------------------
    def _expr(self, e: cst.BaseExpression, scope: Scope, at: Event | None, depth: int) -> VKind:
        # `cls` is type(e), read once; mypy does not narrow `e` by it: each ignore below ("by cls") is on a branch
        # whose test on cls gives e the attribute it reads
        cls = type(e)
        if cls in (cst.Integer, cst.Float, cst.Imaginary):
            return VKind.NUMBER
        if cls in (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString):
            return VKind.STRING
        if cls in (cst.Tuple, cst.List, cst.Set):
            return self._container([el.value for el in e.elements], scope, at, depth)  # type: ignore[attr-defined]  # by cls
        if cls in (cst.ListComp, cst.SetComp, cst.GeneratorExp):
            return self._container([e.elt], scope, at, depth)  # type: ignore[attr-defined]  # by cls
        if cls in (cst.Dict, cst.DictComp):
            return VKind.CONTAINER
        if cls is cst.Name:
            v = e.value  # type: ignore[attr-defined]  # by cls
            if v in ("True", "False"):
                return VKind.NUMBER
            if v == "None":
                return VKind.NONE
            found = self.of_name(v, scope, at, depth)
            if found is VKind.UNKNOWN and not scope.params.get(v):
                bound = self._comprehensions.bound(scope.node, e, self.model.text)  # type: ignore[arg-type]  # by cls
                if bound is not None:  # `p` of `sum(p.norm() for p in model.parameters())`
                    return containers.element_of_iterable(self, bound[0], scope, at, depth + 1, bound[1])
            return found
        if cls is cst.Attribute:
            return self._attribute(e, scope, at, depth)  # type: ignore[arg-type]  # by cls
        if cls is cst.Subscript:
            return containers.entry(self, e, scope, at, depth)  # type: ignore[arg-type]  # by cls
        if cls is cst.BinaryOperation:
            left = self.of(e.left, scope, at, depth + 1)  # type: ignore[attr-defined]  # by cls
            right = self.of(e.right, scope, at, depth + 1)  # type: ignore[attr-defined]  # by cls
            if type(e.operator) is cst.Modulo and left is VKind.STRING:  # type: ignore[attr-defined]  # by cls
                return VKind.STRING
            return arith(left, right)
        if cls is cst.UnaryOperation:
            if type(e.operator) is cst.Not:  # type: ignore[attr-defined]  # by cls
                return VKind.NUMBER
            return self.of(e.expression, scope, at, depth + 1)  # type: ignore[attr-defined]  # by cls
        if cls is cst.Comparison:
            kinds = [self.of(e.left, scope, at, depth + 1)] + [  # type: ignore[attr-defined]  # by cls
                self.of(c.comparator, scope, at, depth + 1) for c in e.comparisons  # type: ignore[attr-defined]  # by cls
            ]
            return VKind.NUMBER if all(k in (VKind.NUMBER, VKind.STRING, VKind.NONE) for k in kinds) else VKind.UNKNOWN
        if cls is cst.IfExp:
            return join([self.of(e.body, scope, at, depth + 1),  # type: ignore[attr-defined]  # by cls
                         self.of(e.orelse, scope, at, depth + 1)])  # type: ignore[attr-defined]  # by cls
        if cls is cst.Call:
            return self._call(e, scope, at, depth)  # type: ignore[arg-type]  # by cls
        if cls is cst.Await:
            return self.of(e.expression, scope, at, depth + 1)  # type: ignore[attr-defined]  # by cls
        return VKind.UNKNOWN

    def _attribute(self, e: cst.Attribute, scope: Scope, at: Event | None, depth: int) -> VKind:
        attr = e.attr.value
        if attr in ("data", "grad") or containers.indices_of(e):
            return VKind.TENSOR  # (`out.topk(5).indices`)
        if attr in ("shape", "device", "dtype"):
            return VKind.CONTAINER if attr == "shape" else VKind.UNKNOWN
        if attr in ("ndim", "requires_grad", "is_cuda", "training"):
            return VKind.NUMBER
        name = dotted(e)
        if attr in sem.PARAMETER_ATTRIBUTES and name is not None and self._of_a_module(name, scope, at, depth):
            return VKind.GRAPH  # `model.head.weight`: a parameter, so what is computed from it has a graph
        if name is not None and name.startswith("self."):
            return self.of_name(name, scope, at, depth)
        base = self.of(e.value, scope, at, depth + 1)
        if base is VKind.GRAPH:
            return VKind.GRAPH  # `outputs.loss`, `out.logits` of a forward
        if base is VKind.MODULE and name is not None and sem.is_module_name(name):
            return VKind.MODULE  # `model.module`, `self.model.encoder`
        if name is not None and name.count(".") >= 1 and sem.is_module_name(name):
            return VKind.MODULE
        return VKind.UNKNOWN

    def _of_a_module(self, name: str, scope: Scope, at: Event | None, depth: int) -> bool:
        """Is `a.b.c` of `a.b.c.weight` a module, or an attribute of one (`model.module.last_layer`)?"""
        parts = name.split(".")[:-1]
        if parts[0] == "self":
            return scope.class_name is not None and self.model.is_module_class(scope.class_name)
        return self.of_name(parts[0], scope, at, depth + 1) is VKind.MODULE or any(
            sem.is_module_name(part) for part in parts[1:])

    def _call(self, call: cst.Call, scope: Scope, at: Event | None, depth: int) -> VKind:
        func = call.func
        name = dotted(func)
        if type(func) is cst.Attribute:
            method = func.attr.value
            if method in sem.NUMBER_METHODS or method == "size" and call.args:  # `y.size(0)`: one dimension's size
                return VKind.NUMBER
            if method in sem.CONTAINER_METHODS:
                return VKind.CONTAINER
            if method in sem.DATA_METHODS and not call.args:
                return VKind.DATA
            if method == "detach" or method in sem.INDEX_FUNCTIONS and not (name or "").startswith("self."):
                return VKind.TENSOR  # (`torch.eq(pred, y)`, `out.argmax(1)`: an index, an order, a truth value)
            if name is not None and (name in sem.NUMBER_FUNCTIONS):
                return VKind.NUMBER
            if name is not None and (name in sem.STRING_FUNCTIONS or name.startswith("os.path.")):
                return VKind.STRING
            prefix = name.rsplit(".", 1)[0] if name is not None else None
            if prefix in ("torch",) and method in sem.TENSOR_CONSTRUCTORS:
                if any(a.keyword is not None and a.keyword.value == "requires_grad" and dotted(a.value) != "False" for a in call.args):
                    return VKind.UNKNOWN
                return VKind.TENSOR
            if prefix in ("np", "numpy") and method in sem.TENSOR_CONSTRUCTORS:
                return VKind.DATA  # an ndarray holds numbers (`a[i] = loss` converts the value, or raises)
            if prefix in sem.TENSOR_FUNCTION_MODULES or (prefix or "").startswith("torch."):
                assert prefix is not None  # neither holds for None
                if prefix in sem.MODULE_NAMESPACES or (method[:1].isupper() and prefix.startswith("torch.nn")):
                    return VKind.MODULE
                if method in sem.MODULE_WRAPPERS:
                    return self._first_arg(call, scope, at, depth)
                return containers.from_args(self, call, scope, at, depth)
            if prefix in sem.MODULE_NAMESPACES and method[:1].isupper():
                return VKind.MODULE
            if name is not None and (name.count(".") == 1 or name.startswith("self.") and name.count(".") == 2):
                callee = self.callee(scope, name)  # `self.f(...)`, or a method of an object of known class
                if callee is not None:
                    return self._summary(callee, call, depth, scope, at)
            if name is not None and self.model.project is not None:
                found = self._external(scope, name, call, at, depth)
                if found is not None:
                    return found
            if (name is not None and name.startswith("self.") and name.count(".") == 1
                    and self.of_name(name, scope, at, depth + 1) is VKind.MODULE):
                return VKind.GRAPH  # `self.fc(x)` with `self.fc = nn.Linear(...)`: a module's forward
            if method in sem.DISTRIBUTION_GRAPH_METHODS and containers.distribution_with_graph(self, func.value, scope, at, depth):
                return VKind.GRAPH  # `Categorical(policy(s)).log_prob(a)`: the policy's graph
            receiver = self.of(func.value, scope, at, depth + 1)
            if receiver is VKind.STRING and method in sem.STRING_METHODS:
                return VKind.STRING
            if receiver is VKind.MODULE:
                if method in sem.MODULE_METHODS_RETURNING_MODULE:
                    return VKind.MODULE
                if method == "forward":
                    return VKind.GRAPH
                return VKind.UNKNOWN
            if receiver in (VKind.GRAPH, VKind.TENSOR) and method in sem.GRAPH_PRESERVING_METHODS:
                return receiver
            if name is not None and sem.is_module_name(name) and name.count(".") == 1 and name.startswith("self."):
                return VKind.GRAPH  # `self.model(x)` with a module attribute set outside this file's view
            return VKind.UNKNOWN
        if type(func) is cst.Name:
            fname = func.value
            if fname in sem.NUMBER_FUNCTIONS:
                return VKind.NUMBER
            if fname in sem.STRING_FUNCTIONS:
                return VKind.STRING
            if fname in ("tuple", "list") and len(call.args) == 1:
                return self._container([call.args[0].value], scope, at, depth, iterable=True)
            if fname in sem.CONTAINER_FUNCTIONS:
                return VKind.CONTAINER
            if fname in ("sum", "max", "min", "abs"):
                return containers.from_args(self, call, scope, at, depth, numbers_stay=True)
            if fname in sem.MODULE_WRAPPERS:
                return self._first_arg(call, scope, at, depth)
            if fname == "self" and scope.class_name is not None and self.model.is_module_class(scope.class_name):
                return VKind.GRAPH  # `self(x)` in a method of a module: its own forward
            callee = self.callee(scope, fname)
            if callee is not None:
                return self._summary(callee, call, depth, scope, at)
            if self.model.project is not None:
                found = self._external(scope, fname, call, at, depth)
                if found is not None:
                    return found
            cls = self.model.classes.get(fname)
            if cls is not None:
                return VKind.MODULE if self.model.is_module_class(fname) else VKind.UNKNOWN
            if fname in self.model.imported and fname[:1].isupper():
                # a class of another project file that derives from nn.Module (`from discriminator import D`)
                project = self.model.project
                return VKind.MODULE if project is not None and project.module_base(fname) else VKind.UNKNOWN
            called = self.of_name(fname, scope, at, depth + 1)
            if called is VKind.MODULE:
                return VKind.GRAPH
            if called is VKind.UNKNOWN and (sem.is_loss_name(fname) or self._aliases_loss(fname, scope, at)):
                return VKind.GRAPH  # `adversarial_loss(out, y)`: a loss function the analysis cannot see
            return VKind.UNKNOWN
        return VKind.UNKNOWN

    def _aliases_loss(self, name: str, scope: Scope, at: Event | None) -> bool:
        """`fn = my_loss`, `fn = self.loss_func` (every definition that reaches `at`): `fn(...)` calls a loss
        function."""
        if at is None:
            return False
        defs, entry = scope.reaching(name, at)
        return bool(defs) and not entry and all(
            d.kind is EventKind.ASSIGN and d.variant is AssignForm.PLAIN and (alias := dotted(d.value)) is not None
            and sem.is_loss_name(alias) for d in defs
        )

    def _container(
        self, items: list[cst.BaseExpression], scope: Scope, at: Event | None, depth: int, iterable: bool = False
    ) -> VKind:
        """A container is DATA when none of its items can hold a graph (`tuple(h.data for h in hidden)`)."""
        kinds = []
        for item in items:
            k = self.of(item, scope, at, depth + 1)
            if iterable and k in (VKind.DATA, VKind.CONTAINER):
                kinds.append(VKind.TENSOR if k is VKind.DATA else VKind.UNKNOWN)
            else:
                kinds.append(k)
        return VKind.DATA if all(k.graph_free for k in kinds) else VKind.CONTAINER

    def _external(self, scope: Scope, name: str, call: cst.Call, at: Event | None, depth: int) -> VKind | None:
        """What a function of another project file returns (its exports, `_handed` too), or None if it is none."""
        found = self.foreign(scope, name)
        if found is None:
            return None
        kind, params = VKind.__members__.get(found.export.returns, VKind.UNKNOWN), found.export.params
        if kind is VKind.UNKNOWN and self._handed(call, params[1:] if "." in name else params, found.export.passes,
                                                  scope, at, depth):
            return VKind.GRAPH
        return VKind.UNKNOWN if kind is VKind.CYCLE else kind

    def callee(self, scope: Scope, name: str) -> Scope | None:
        """The function of the file `name(...)` runs: one it names, or the `__call__` of an object of a class of
        the file (`self.criterion(out, y)` with `self.criterion = DualLoss(cfg)`)."""
        found = self.model.resolve(scope, name)
        if found is None and name.count(".") == (1 if name.startswith("self.") else 0):
            found = self.model.resolve(scope, f"{name}.__call__")
        return found

    def foreign(self, scope: Scope, name: str) -> Resolved | None:
        """A function of another project file: one that may act (`external`), or, asked only by a function that
        back-propagates, any other (a loss function's file is parsed for it), or a method of an object made by a
        class or factory of another file (`self.loss_fn(...)` after `self.loss_fn = create_loss(cfg)`)."""
        project = self.model.project
        found = self.model.external(scope, name) if project is not None else None
        if found is None and project is not None and scope.own_backwards():
            if not name.startswith("self."):
                found = project.returned(name)
            call = name.count(".") == (1 if name.startswith("self.") else 0)
            receiver, method = (name, "__call__") if call else name.rsplit(".", 1)
            maker = self.model.receivers.maker_of(scope, receiver) if found is None else None
            found = project.instance_returned(maker, method) if maker is not None else found
        return found

    def _summary(self, callee: Scope, call: cst.Call, depth: int, scope: Scope, at: Event | None) -> VKind:
        """What calling a function of the file gives. A function that runs its work under `no_grad` when a
        parameter says so (`if cross_valid: with torch.no_grad(): ...`) returns a graph or not by its caller's
        argument: a call that sets that parameter is not known to return what the default path returns."""
        modes = callee.mode_params()
        if modes and callee.given_any(call, modes):
            return VKind.UNKNOWN
        kind = self.returns(callee, depth + 1)
        params = positional_params(callee.node)[1 if callee.class_name else 0:]
        if kind is VKind.UNKNOWN and self._handed(call, params, graph_params(callee), scope, at, depth):
            return VKind.GRAPH
        return kind

    def _handed(self, call: cst.Call, params: list[str], passes, scope: Scope, at: Event | None, depth: int) -> bool:
        """Where the callee's own view leaves its return unknown: a parameter it passes on with its graph
        (`passing.graph_params`) is handed a tensor with a graph, so the result has one."""
        return any(p in passes and (a := argument_for(call, params, p)) is not None
                   and self.of(a, scope, at, depth + 1) is VKind.GRAPH for p in params)

    def _first_arg(self, call: cst.Call, scope: Scope, at: Event | None, depth: int) -> VKind:
        if call.args and call.args[0].keyword is None:
            return self.of(call.args[0].value, scope, at, depth + 1)
        return VKind.UNKNOWN


def _placeholder(node: cst.CSTNode) -> bool:
    """A body of `pass`, `...` or `raise NotImplementedError` (after a docstring): a method for subclasses to override."""
    body = list(node.body.body) if type(node) is cst.FunctionDef and type(node.body) is cst.IndentedBlock else []
    stmts = [s for line in body if type(line) is cst.SimpleStatementLine for s in line.body]
    return len(stmts) == len(body) > 0 and all(type(s) in (cst.Pass, cst.Raise) or type(s) is cst.Expr and type(
        s.value) in (cst.Ellipsis, cst.SimpleString, cst.ConcatenatedString) for s in stmts)
