"""Two readings of a cut value in a loss that say it is meant, from the loss's own arithmetic.

- `whole_factors`: a loss back-propagated as one product (`-log_prob * advantage.detach()`, through a sign, a
  division, `.mean()`): `backward()` needs a graph in it, and a cut factor has none, so the other factor carries
  it, whatever the analysis knows of its kind: the cut factor is that factor's weight (an actor-critic's advantage,
  a policy gradient's return), not a term.
- `stabilizing_shift`: `x - m.detach()` with `m` the maximum (or log-sum-exp) of `x` itself, bound as `m, _ =
  x.max(dim=1, keepdim=True)` or `m = torch.amax(x, 1)`: the log-sum-exp trick moves logits by a constant before a
  softmax, which does not change the softmax or its gradient; the cut only keeps the shift from being
  differentiated (a supervised-contrastive loss).
"""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.events import AssignForm, Event
from torchlint.analysis.exprs import Detachment, as_detachment, dotted
from torchlint.analysis.scopes import Scope
from torchlint.analysis.semantics import GRAPH_REDUCTIONS
from torchlint.source.walk import walk

_SHIFTS = frozenset({"max", "amax", "logsumexp"})


def whole_factors(scope: Scope, b: Event) -> set[int]:
    """The ids of the factors of the loss the backward `b` back-propagates, when that loss is one product: its value
    (`(-logp * adv.detach()).mean().backward()`) or each definition of the name it reads that reaches it
    (`actor_loss = -logp * adv.detach()`, then `actor_loss.backward()`)."""
    value = _inside(b.value) if b.value is not None else None
    if value is None:
        return set()
    found = _factors(value)
    if type(value) is cst.Name:
        defs, _ = scope.reaching(value.value, b)
        for d in defs:
            if d.variant is AssignForm.PLAIN and d.value is not None:
                found |= _factors(_inside(d.value))
    return found


def _inside(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr` through a sign, a division by anything, and a mean or sum of the whole tensor."""
    while True:
        if type(expr) is cst.UnaryOperation:
            expr = expr.expression
        elif type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Divide:
            expr = expr.left
        elif type(expr) is cst.Call and type(expr.func) is cst.Attribute and not expr.args \
                and expr.func.attr.value in GRAPH_REDUCTIONS:
            expr = expr.func.value
        elif type(expr) is cst.Call and dotted(expr.func) in ("torch.mean", "torch.sum") and len(expr.args) == 1:
            expr = expr.args[0].value
        else:
            return expr


def _factors(expr: cst.BaseExpression) -> set[int]:
    """In a product (`a * b * c.detach()`, seen through signs), each factor multiplied by a cut value alone: a factor
    holding a graph of its own (`(ce + reg.data) * w`) says nothing of the other."""
    expr = _inside(expr)
    if type(expr) is not cst.BinaryOperation or type(expr.operator) is not cst.Multiply:
        return set()
    found = _factors(expr.left) | _factors(expr.right)
    for one, other in ((expr.left, expr.right), (expr.right, expr.left)):
        if as_detachment(_inside(other)) is not None:
            found.add(id(one))
    return found


def stabilizing_shift(scope: Scope, det: Detachment, expr: cst.BaseExpression, at: Event) -> bool:
    """In `expr` (read at `at`), the cut `det` is subtracted from the value whose maximum (or log-sum-exp) it is."""
    shifted = next((n for n in walk(expr) if type(n) is cst.BinaryOperation and type(n.operator) is cst.Subtract
                    and n.right is det.node), None)
    base = dotted(shifted.left) if shifted is not None else None
    if base is None:
        return False
    if type(det.operand) is not cst.Name:
        return _reduction_of(det.operand, base)
    defs, entry = scope.reaching(det.operand.value, at)
    return bool(defs) and not entry and all(
        d.value is not None and d.variant in (AssignForm.PLAIN, AssignForm.UNPACK_FIRST) and _reduction_of(d.value, base)
        for d in defs)


def _reduction_of(value: cst.BaseExpression, base: str) -> bool:
    """`base.max(...)`, `base.max(1)[0]`, `torch.amax(base, 1)`, `torch.logsumexp(base, 1)`."""
    if type(value) is cst.Subscript:
        value = value.value
    if type(value) is not cst.Call or type(value.func) is not cst.Attribute or value.func.attr.value not in _SHIFTS:
        return False
    owner = dotted(value.func.value)
    return owner == base or owner == "torch" and bool(value.args) and dotted(value.args[0].value) == base
