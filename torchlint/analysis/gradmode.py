"""What autograd's modes and leaves do to values. `torch.no_grad()` / `inference_mode()` cut: a value computed
under it carries no graph, though the same code run with grad would carry one (kinds say the first; this says the
second, for rules that ask whether a value without a graph was meant to have one). And the leaves a function makes
itself and reads the `.grad` of (an input gradient taken with `backward()` instead of `autograd.grad`).
"""

from __future__ import annotations

import weakref

import libcst as cst

from torchlint.analysis.events import AssignForm, Event, EventKind
from torchlint.analysis.exprs import added_terms, dotted
from torchlint.analysis.model import FileModel
from torchlint.analysis.scopes import Scope
from torchlint.analysis.semantics import (
    CONSTANT_NAMES, GRAPH_PRESERVING_METHODS, TENSOR_FUNCTION_MODULES, computes_loss, is_callable_name, is_module_name,
)
from torchlint.analysis.vkind import VKind
from torchlint.source.walk import walk


def cut_by_no_grad(model: FileModel, scope: Scope, name: str, at: Event) -> tuple[Event, ...]:
    """The definitions of `name` that reach `at` when every one of them is under `no_grad` (and `at` is not), and
    the value is computed from a forward that the function also runs with grad (the model it trains:
    `self.forward(...)`, `policy(obs)`): run outside `no_grad` it would carry that forward's graph. Empty
    otherwise: a value of a model the function never runs with grad (a reference or target network) is meant to
    be a constant."""
    if "no_grad" in at.contexts:
        return ()
    defs = _under_no_grad(model, scope, name, at)
    if not defs:
        return ()
    trained = _forwards_with_grad(model, scope)
    for d in defs:
        assert d.value is not None  # checked above
        for src in (d, *scope.operand_defs(d.value, d)):
            if src.value is not None and "no_grad" in src.contexts and (
                    _calls(src.value) & trained or _reads_a_graph(model, scope, src)):
                return defs
    return ()


def _reads_a_graph(model: FileModel, scope: Scope, d: Event) -> bool:
    """The value computed under `no_grad` reads a name bound, outside it, to a tensor with a graph (`emb =
    encoder(fake)` of the generator's `fake`): run with grad it would carry that graph on."""
    assert d.value is not None  # the caller's
    for n in _variables(d.value):
        found = scope.reaching(n.value, d)[0]
        if found and all("no_grad" not in x.contexts for x in found) and any(
                model.kinds.of_def(x, scope) is VKind.GRAPH for x in found):
            return True
    return False


def _under_no_grad(model: FileModel, scope: Scope, name: str, at: Event, depth: int = 0) -> tuple[Event, ...]:
    """The definitions of `name` reaching `at`, when each is under `no_grad`, or, outside it, adds up, reduces or
    weighs only such values (`kl = kl_sum.mean()`, `kl_loss = beta * kl` after the `with` block); empty otherwise."""
    # An entry path of a local, or one from a `del`, leaves the name unbound: not another value.
    # (`kl = kl.mean()` in a loop reaches itself from the iteration before: not another value)
    defs = tuple(d for d in scope.reaching(name, at)[0] if d.kind is not EventKind.RESET and d is not at)
    if not defs or depth > 3 or any(d.value is None for d in defs):
        return ()
    found: list[Event] = []
    for d in defs:
        if "no_grad" in d.contexts:
            found.append(d)
            continue
        assert d.value is not None  # checked above
        # a criterion's value carries the graph of what it compares (`ce(out, y, reduction="none") * w`: a weight)
        terms = added_terms(d.value, lambda e, d=d: model.kinds.of(e, scope, d) is VKind.GRAPH or type(e) is cst.Call
                            and computes_loss(dotted(e.func) or ""))
        names = [t for t in terms if type(t) is cst.Name]
        if not names or not d.rebinds or any(  # the other factors: weights read from settings (`args.beta`)
                type(t) is not cst.Name and (type(t) is not cst.Attribute or model.kinds.of(t, scope, d) is VKind.GRAPH)
                for t in terms):
            computed = _computed_from_cut(model, scope, d, depth) if d.rebinds else None
            if not computed:
                return ()
            found.extend(computed)
            continue
        if _reads_a_forward(model, scope, d, {t.value for t in names}):
            return ()  # `beta * kl + (out ** 2).mean()`: the value carries a graph of its own
        for t in names:
            inner = _under_no_grad(model, scope, t.value, d, depth + 1)
            if not inner:
                return ()
            found.extend(inner)
    return tuple(found)


def _computed_from_cut(model: FileModel, scope: Scope, d: Event, depth: int) -> list[Event] | None:
    """`d` computes its value with tensor operations and criteria only (no module's forward) from names that are
    each graph-free or computed under `no_grad` themselves (`emb_loss = F.mse_loss(emb, c)` of a `no_grad` `emb`):
    the `no_grad` definitions it rests on, or None."""
    assert d.value is not None  # the caller's
    if not _a_computation(d.value):
        return None  # (a product may weigh a graph term by the cut value: `picked[0] * kl`)
    called: set[int] = set()
    for c in walk(d.value):
        if type(c) is cst.Call:
            func = dotted(c.func) or ""
            criterion = computes_loss(func)
            tensor_op = func.rpartition(".")[0] in TENSOR_FUNCTION_MODULES or (
                type(c.func) is cst.Attribute and c.func.attr.value in GRAPH_PRESERVING_METHODS
                and not (func.startswith("self.") and func.count(".") == 1))
            if not (criterion or tensor_op) or is_module_name(func) and not criterion:
                return None  # a forward, or a call of unknown effect: it may carry a graph of its own
            if func:  # the names of a dotted function (`F.mse_loss`), not those of a receiver computed by a call
                called.update(id(n) for n in walk(c.func) if type(n) is cst.Name)
    found: list[Event] = []
    for n in _variables(d.value):
        if id(n) in called or n.value in CONSTANT_NAMES:
            continue
        inner = _under_no_grad(model, scope, n.value, d, depth + 1)
        if inner:
            found.extend(inner)
        elif not model.kinds.of(n, scope, d).graph_free and not _data(model, scope, n.value, d):
            return None  # (a value of unknown origin may carry a graph: a student's features beside a teacher's)
    return found or None


def _a_computation(e: cst.BaseExpression) -> bool:
    """A call (a criterion, a reduction), a sign, or a number combined with one (`1 - F.cosine_similarity(a, b)`)."""
    if type(e) is cst.Call:
        return True
    if type(e) is cst.UnaryOperation:
        return _a_computation(e.expression)
    if type(e) is cst.BinaryOperation and type(e.operator) in (cst.Add, cst.Subtract, cst.Multiply, cst.Divide):
        number = (cst.Integer, cst.Float)
        return (type(e.left) in number and _a_computation(e.right)) or (type(e.right) in number and _a_computation(e.left))
    return False


def _data(model: FileModel, scope: Scope, name: str, at: Event) -> bool:
    """`name` is bound only by the loop to an item of what it iterates, not known to carry a graph (`c` of `for
    z, c in loader`): a batch's data."""
    defs, entry = scope.reaching(name, at)
    return bool(defs) and not entry and all(
        d.variant is AssignForm.FOR and d.value is not None and model.kinds.of(d.value, scope, d) is not VKind.GRAPH
        for d in defs)


def _reads_a_forward(model: FileModel, scope: Scope, d: Event, chained: set[str]) -> bool:
    """Does the value of `d` read, besides the `chained` names, a name bound outside `no_grad` to what a forward
    the function trains returned (`out` of `out = model(x)`)?"""
    assert d.value is not None  # the caller's
    trained = _forwards_with_grad(model, scope)
    for n in _variables(d.value):
        if n.value in chained:
            continue
        if any(x.value is not None and "no_grad" not in x.contexts and _calls(x.value) & trained
               for x in scope.reaching(n.value, d)[0]):
            return True
    return False


def from_trained_forward(model: FileModel, scope: Scope, expr: cst.BaseExpression, at: Event) -> bool:
    """`expr` is computed, outside `no_grad`, from a forward the function runs with grad (`log_probs[i]` with
    `log_probs.append(torch.log(policy(s)[a]))`): it may carry that forward's graph, whatever its kind says."""
    trained = _forwards_with_grad(model, scope)
    if not trained or "no_grad" in at.contexts:
        return False
    if _calls(expr) & trained:
        return True
    return any(d.value is not None and "no_grad" not in d.contexts and _calls(d.value) & trained
               for d in scope.operand_defs(expr, at))


def _forwards_with_grad(model: FileModel, scope: Scope) -> frozenset[str]:
    """The forwards the function runs outside `no_grad`: calls of a module (`model(x)`, `self.policy(x)`) or of
    a `forward` method, in the values it assigns or back-propagates (once per scope)."""
    cached = _FORWARDS.get(scope)
    if cached is not None:
        return cached
    out: set[str] = set()
    for e in scope.events:
        if e.value is None or "no_grad" in e.contexts or e.scope is not scope.node:
            continue
        if e.kind not in (EventKind.ASSIGN, EventKind.BACKWARD):
            continue
        for n in walk(e.value):
            if type(n) is not cst.Call or (func := dotted(n.func)) is None or func in out or is_callable_name(func):
                continue  # a criterion or loss function computes a loss, it is not the model trained
            if (func.rsplit(".", 1)[-1] == "forward" or is_module_name(func)
                    or model.kinds.of(n.func, scope, e) is VKind.MODULE):
                out.add(func)
    answer = frozenset(out)
    _FORWARDS[scope] = answer
    return answer


_FORWARDS: weakref.WeakKeyDictionary[Scope, frozenset[str]] = weakref.WeakKeyDictionary()  # dies with its scope


def _variables(value: cst.BaseExpression) -> list[cst.Name]:
    """The names `value` reads as variables: not the attribute names of a chain (`fc` of `self.fc`), nor `self`."""
    attrs = {id(n.attr) for n in walk(value) if type(n) is cst.Attribute}
    return [n for n in walk(value) if type(n) is cst.Name and id(n) not in attrs and n.value != "self"]


def _calls(expr: cst.BaseExpression) -> set[str]:
    return {f for n in walk(expr) if type(n) is cst.Call and (f := dotted(n.func)) is not None}


def leaf_grads_read(scope: Scope) -> frozenset[str]:
    """The tensors the function makes leaves that require grad (`x.requires_grad = True`, `x.requires_grad_()`,
    `x = Variable(v, requires_grad=True)`) and whose `.grad` it then reads, never resetting it (`x.grad = None`,
    `del x.grad`): a `backward(create_graph=True)` leaves in that `.grad` a gradient whose graph refers back to
    `x`, a reference cycle nothing breaks."""
    leaves: set[str] = set()
    read: set[str] = set()
    reset: set[str] = set()
    for n in walk(scope.node):
        cls = type(n)
        if cls is cst.Assign or cls is cst.AugAssign or cls is cst.AnnAssign:
            targets = [t.target for t in n.targets] if cls is cst.Assign else [n.target]  # type: ignore[attr-defined]
            for t in targets:
                if type(t) is cst.Attribute and t.attr.value == "requires_grad" and (x := dotted(t.value)):
                    leaves.add(x)
                elif type(t) is cst.Attribute and t.attr.value == "grad" and (x := dotted(t.value)):
                    reset.add(x)
                elif (x := dotted(t)) is not None and type(n.value) is cst.Call and _asks_grad(n.value):  # type: ignore[attr-defined]
                    leaves.add(x)
        elif cls is cst.Del:
            reset |= {x for t in walk(n.target) if type(t) is cst.Attribute and t.attr.value == "grad"  # type: ignore[attr-defined]
                      and (x := dotted(t.value))}
        elif cls is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value == "requires_grad_":  # type: ignore[attr-defined]
            if (x := dotted(n.func.value)) is not None:  # type: ignore[attr-defined]
                leaves.add(x)
        elif cls is cst.Attribute and n.attr.value == "grad" and (x := dotted(n.value)):  # type: ignore[attr-defined]
            read.add(x)
    return frozenset((read & leaves) - reset)


def _asks_grad(call: cst.Call) -> bool:
    return any(a.keyword is not None and a.keyword.value == "requires_grad" and dotted(a.value) == "True"
               for a in call.args)
