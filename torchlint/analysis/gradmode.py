"""What autograd's modes and leaves do to values. `torch.no_grad()` / `inference_mode()` cut: a value computed
under it carries no graph, though the same code run with grad would carry one (kinds say the first; this says the
second, for rules that ask whether a value without a graph was meant to have one). And the leaves a function makes
itself and reads the `.grad` of (an input gradient taken with `backward()` instead of `autograd.grad`).
"""

from __future__ import annotations

import weakref

import libcst as cst

from torchlint.analysis.events import Event, EventKind
from torchlint.analysis.exprs import added_terms, dotted
from torchlint.analysis.model import FileModel
from torchlint.analysis.scopes import Scope
from torchlint.analysis.semantics import is_callable_name, is_module_name
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
    if not trained:
        return ()
    for d in defs:
        assert d.value is not None  # checked above
        for src in (d, *scope.operand_defs(d.value, d)):
            if src.value is not None and "no_grad" in src.contexts and _calls(src.value) & trained:
                return defs
    return ()


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
        terms = added_terms(d.value, lambda e, d=d: model.kinds.of(e, scope, d) is VKind.GRAPH)
        names = [t for t in terms if type(t) is cst.Name]
        if not names or not d.rebinds or any(  # the other factors: weights read from settings (`args.beta`)
                type(t) is not cst.Name and (type(t) is not cst.Attribute or model.kinds.of(t, scope, d) is VKind.GRAPH)
                for t in terms):
            return ()
        if _reads_a_forward(model, scope, d, {t.value for t in names}):
            return ()  # `beta * kl + (out ** 2).mean()`: the value carries a graph of its own
        for t in names:
            inner = _under_no_grad(model, scope, t.value, d, depth + 1)
            if not inner:
                return ()
            found.extend(inner)
    return tuple(found)


def _reads_a_forward(model: FileModel, scope: Scope, d: Event, chained: set[str]) -> bool:
    """Does the value of `d` read, besides the `chained` names, a name bound outside `no_grad` to what a forward
    the function trains returned (`out` of `out = model(x)`)?"""
    assert d.value is not None  # the caller's
    attrs = {id(n.attr) for n in walk(d.value) if type(n) is cst.Attribute}
    trained = _forwards_with_grad(model, scope)
    for n in walk(d.value):
        if type(n) is not cst.Name or id(n) in attrs or n.value in chained or n.value == "self":
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
