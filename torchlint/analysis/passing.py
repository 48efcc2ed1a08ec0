"""What a function of the file passes from its parameters to what it returns, as a summary of effects rather than of
results: the parameters whose autograd graph every path it returns them on keeps (`def dice(pred, target): inter
= torch.sum(pred * target); return 2 * inter / (pred.sum() + target.sum())` keeps `pred`'s and `target`'s). A
caller that hands such a parameter a tensor with a graph gets a tensor with that graph back, whatever the function's
own view of its parameters (unknown). Followed through arithmetic, the tensor methods that keep the graph, the
differentiable functions of `torch` / `F`, and the function's own definitions; anything else (a comparison, an
`argmax`, a `.item()`, `.detach()`, a call of unknown effect, code under `no_grad`) passes nothing."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.events import AssignForm, EventKind
from torchlint.analysis.exprs import argument_for, dotted, positional_params
from torchlint.analysis.lookup import FileLookup
from torchlint.analysis.scopes import Scope
from torchlint.analysis.semantics import GRAPH_PRESERVING_METHODS

# torch / F functions whose result is differentiable in their tensor arguments.
_DIFFERENTIABLE = frozenset(
    """sum mean exp log log1p sqrt rsqrt pow abs neg sigmoid tanh relu softmax log_softmax logsumexp norm matmul mm
    bmm mul add sub div square clamp clip cat stack where einsum dot cosine_similarity mse_loss l1_loss
    smooth_l1_loss binary_cross_entropy binary_cross_entropy_with_logits cross_entropy nll_loss kl_div""".split())
_MODULES = ("torch", "F", "torch.nn.functional", "nn.functional")
# Methods that keep the graph, less those whose result is integral (no graph) or a pair of values and indices.
_METHODS = GRAPH_PRESERVING_METHODS - {"long", "int", "max", "min"}
_OPS = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power, cst.MatrixMultiply)
_DEPTH = 12  # definitions followed for one return
# Assignments whose new value is the old one combined with the assigned value (`x += y`, `x = x * w`).
_COMBINING = (AssignForm.ADD, AssignForm.SELF_ADD, AssignForm.SUB, AssignForm.MUL, AssignForm.DIV)


def graph_params(scope: Scope) -> frozenset[str]:
    """The parameters of `scope` (a function of the file) some return passes on with their graph; none when the
    function runs anything under `no_grad` or has no return with a value."""
    cached = getattr(scope, "_graph_params", None)
    if cached is not None:
        return cached
    params = set(scope.params) - {"self", "cls"}
    out: set[str] = set()
    if params and not any("no_grad" in e.contexts or "inference_mode" in e.contexts for e in scope.events):
        for r in scope.own_returns():
            if r.value is not None:
                out |= _passed(scope, r.value, r, params, set(), 0)
    found = frozenset(out)
    scope._graph_params = found  # type: ignore[attr-defined]  # memo on the scope, built once per file
    return found


def _passed(scope: Scope, e: cst.BaseExpression, at, params: set[str], seen: set[int], depth: int) -> set[str]:
    if depth > _DEPTH:
        return set()
    cls = type(e)
    if cls is cst.Name:
        name = e.value  # type: ignore[attr-defined]  # by cls
        defs, entry = scope.reaching(name, at)
        out = {name} if entry and name in params else set()
        for d in defs:
            if (id(d) in seen or d.value is None or d.kind is not EventKind.ASSIGN
                    or d.variant is not AssignForm.PLAIN and d.variant not in _COMBINING):
                continue
            seen.add(id(d))
            out |= _passed(scope, d.value, d, params, seen, depth + 1)
            if d.variant in _COMBINING:  # `x += y`: what it held goes on too
                out |= _passed(scope, e, d, params, seen, depth + 1)
        return out
    if cls is cst.BinaryOperation:
        if type(e.operator) not in _OPS:  # type: ignore[attr-defined]  # by cls
            return set()
        return _passed(scope, e.left, at, params, seen, depth + 1) | _passed(  # type: ignore[attr-defined]  # by cls
            scope, e.right, at, params, seen, depth + 1)  # type: ignore[attr-defined]  # by cls
    if cls is cst.UnaryOperation and type(e.operator) is cst.Minus:  # type: ignore[attr-defined]  # by cls
        return _passed(scope, e.expression, at, params, seen, depth + 1)  # type: ignore[attr-defined]  # by cls
    if cls is cst.Call:
        func = e.func  # type: ignore[attr-defined]  # by cls
        name = dotted(func) or ""
        prefix, _, last = name.rpartition(".")
        if prefix in _MODULES and last in _DIFFERENTIABLE or _loss_module(scope, func, at):
            found: set[str] = set()
            for a in e.args:  # type: ignore[attr-defined]  # by cls
                value = a.value
                items = [el.value for el in value.elements] if type(value) in (cst.List, cst.Tuple) else [value]
                for item in items:
                    found |= _passed(scope, item, at, params, seen, depth + 1)
            return found
        if type(func) is cst.Attribute and func.attr.value in _METHODS and not prefix.startswith(("torch", "F")):
            return _passed(scope, func.value, at, params, seen, depth + 1)
    return set()


def _loss_module(scope: Scope, func: cst.BaseExpression, at) -> bool:
    """A criterion of `torch.nn` called: built in the call (`nn.MSELoss()(recon, x)`) or bound to a name by every
    definition that reaches it (`crit = nn.L1Loss(); crit(pred, y)`): differentiable in its inputs."""
    if type(func) is cst.Name:
        defs, entry = scope.reaching(func.value, at)
        return bool(defs) and not entry and all(d.value is not None and _loss_module(scope, d.value, d) for d in defs)
    if type(func) is not cst.Call:
        return False
    prefix, _, last = (dotted(func.func) or "").rpartition(".")
    return prefix in ("nn", "torch.nn") and last.endswith("Loss")


def handed_plain_objects(model: FileLookup, scope: Scope, name: str) -> bool:
    """Every call of the function in the file hands its parameter `name` an instance of a class of the file that is
    no nn.Module (`train(Adaline(2), x, y)`, or a name bound only to such instances): whatever the parameter is
    named (`model`), it holds no module, and what its `forward` returns is not known to carry a graph."""
    memo = getattr(scope, "_plain_objects", None)
    if memo is None:
        memo = scope._plain_objects = {}  # type: ignore[attr-defined]  # memo on the scope, built once per file
    if name not in memo:
        params = positional_params(scope.node)
        found: list[bool] = []
        for caller, e in model.calls_of(scope):
            if type(e.node) is not cst.Call:
                continue
            arg = argument_for(e.node, params[1:] if (e.callee or "").startswith("self.") else params, name)
            values = [arg] if type(arg) is not cst.Name else [
                d.value for d in caller.reaching(arg.value, e)[0]] if arg is not None else [None]
            found.append(bool(values) and all(_plain_instance(model, v) for v in values))
        memo[name] = bool(found) and all(found)
    return memo[name]


def _plain_instance(model: FileLookup, value: cst.BaseExpression | None) -> bool:
    cls = dotted(value.func) if type(value) is cst.Call else None
    return cls is not None and cls in model.classes and not model.is_module_class(cls)
