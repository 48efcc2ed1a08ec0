"""Terms of a loss expression: the calls among its summands (through `+ - * /`, unary signs and reductions) that
copy values into a new tensor (`torch.tensor(losses)`), re-wrap a value as a new leaf (`Variable(x,
requires_grad=True)`), or detach (`.item()`, `.detach()`, `.data`). Syntax only: what carries a graph is asked
of the caller (`graph`)."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.exprs import (
    COMBINING_CALLS, Detachment, as_detachment, combined_items, dotted, is_true, keyword, names_in,
)
from torchlint.analysis.semantics import GRAPH_REDUCTIONS, LIST_TO_TENSOR, TENSOR_REWRAPPERS

# Wrappers that copy a tensor argument into a new leaf (`torch.as_tensor` may return the tensor itself).
COPYING_REWRAPPERS = ("torch.tensor", "Variable", "torch.autograd.Variable")


def lists_to_tensor(expr: cst.BaseExpression) -> list[cst.Call]:
    """`torch.tensor(xs)` (`torch.Tensor([...])` ...) among the terms of `expr`, through arithmetic, reductions
    (`torch.mean(...)`, `.mean()`) and moves (`.to(device)`)."""
    def copies(node: cst.Call) -> bool:
        return dotted(node.func) in LIST_TO_TENSOR and bool(node.args) and node.args[0].keyword is None \
            and not node.args[0].star

    def through(node: cst.Call) -> cst.BaseExpression | None:
        if (dotted(node.func) or "") in COMBINING_CALLS and node.args:
            return node.args[0].value
        if type(node.func) is cst.Attribute and node.func.attr.value in (*GRAPH_REDUCTIONS, "to", "cuda"):
            return node.func.value
        return None

    return term_calls(expr, copies, through)


def term_calls(expr: cst.BaseExpression, wanted, through) -> list[cst.Call]:
    """The calls among the terms of `expr` (through `+ - * /` and unary signs) that `wanted(call)` accepts;
    another call is looked into where `through(call)` names the expression it passes on (a reduction's operand)."""
    out = []
    todo = [expr]
    while todo:
        node = todo.pop()
        if type(node) is cst.BinaryOperation:
            todo += [node.left, node.right]
        elif type(node) is cst.UnaryOperation:
            todo.append(node.expression)
        elif type(node) is cst.Call:
            if wanted(node):
                out.append(node)
            elif (inner := through(node)) is not None:
                todo.append(inner)
    return out


def summand_detachments(expr: cst.BaseExpression, graph=lambda e: False) -> list[Detachment]:
    """Detachments that are terms of `expr`: added, or multiplied by a factor that carries no graph (a weight such
    as `args.alpha`); summed or stacked; not a factor next to a graph tensor (`ce * w.detach()` detaches the
    weight, not a loss), not an argument of other calls. `graph(e)` says whether `e` carries a graph."""
    found = as_detachment(expr)
    if found is not None:
        return [found]
    if type(expr) is cst.BinaryOperation:
        if type(expr.operator) in (cst.Add, cst.Subtract):
            return summand_detachments(expr.left, graph) + summand_detachments(expr.right, graph)
        if type(expr.operator) is cst.Multiply:
            return ((summand_detachments(expr.left, graph) if not weighs(expr.right, expr.left, graph) else [])
                    + (summand_detachments(expr.right, graph) if not weighs(expr.left, expr.right, graph) else []))
        if type(expr.operator) is cst.Divide and not graph(expr.right):
            return summand_detachments(expr.left, graph)
    if type(expr) is cst.UnaryOperation:
        return summand_detachments(expr.expression, graph)
    if type(expr) is cst.Call:
        func = dotted(expr.func)
        if func in COMBINING_CALLS:
            return [d for arg in expr.args for item in combined_items(arg.value) for d in summand_detachments(item, graph)]
        if type(expr.func) is cst.Attribute and expr.func.attr.value in GRAPH_REDUCTIONS and not expr.args:
            return summand_detachments(expr.func.value, graph)
    return []


def weighs(factor: cst.BaseExpression, other: cst.BaseExpression, graph) -> bool:
    """Is `other`, in the product `factor * other`, a weight of `factor` rather than a term of the loss: `factor`
    carries a graph, or `other` is computed from `factor` itself (`log_prob * (log_prob - baseline).detach()`: the
    score-function estimator differentiates `log_prob`, weighted by a value cut from the graph on purpose)."""
    if graph(factor):
        return True
    name = dotted(factor) if type(factor) in (cst.Name, cst.Attribute) else None
    return name is not None and name in names_in(other)


def rewrapped(expr: cst.BaseExpression) -> list[cst.Call]:
    """`torch.tensor(value, requires_grad=True)` (or `Variable(value, requires_grad=True)`) among the terms of
    `expr`: a new leaf made from a value, with no path back to the model."""
    def leaf(node: cst.Call) -> bool:
        grad = keyword(node, "requires_grad")
        return (dotted(node.func) or "") in TENSOR_REWRAPPERS and grad is not None and is_true(grad.value) \
            and bool(node.args) and node.args[0].keyword is None

    def through(node: cst.Call) -> cst.BaseExpression | None:
        reduces = type(node.func) is cst.Attribute and node.func.attr.value in GRAPH_REDUCTIONS and not node.args
        return node.func.value if reduces else None  # type: ignore[attr-defined]  # an Attribute when it reduces

    return term_calls(expr, leaf, through)
