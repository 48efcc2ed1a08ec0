"""Where a value is cut from its graph among the terms of an expression (`loss + aux.item()`, `torch.tensor(
losses)`, `torch.tensor(x.item(), requires_grad=True)`), and where a helper with no backward of its own cuts what
its callers in other project files give it and back-propagate (`cut_for_callers`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from torchlint.analysis.bindings import bound_values
from torchlint.analysis.events import AssignForm, Event, EventKind
from torchlint.analysis.exprs import (
    COMBINING_CALLS, Detachment, as_detachment, combined_items, computes_numbers, cuts_within, dotted, is_true, keyword,
    names_in, operand_names, positional_params, summand_names,
)
from torchlint.analysis.foreign import CallerUse
from torchlint.analysis.model import FileModel
from torchlint.analysis.scopes import Scope
from torchlint.analysis.vkind import VKind
from torchlint.analysis.semantics import (
    DISTRIBUTION_GRAPH_METHODS, GRAPH_PRESERVING_METHODS, GRAPH_REDUCTIONS, LIST_TO_TENSOR, OPTIONS_HOLDERS, SHAPE_READS,
    TENSOR_REWRAPPERS,
)
from torchlint.source.walk import walk

LOSS_NAME = re.compile(r"loss|criterion", re.IGNORECASE)  # a function computing a loss, by its name
# Wrappers that copy a tensor argument into a new leaf (`torch.as_tensor` may return the tensor itself).
COPYING_REWRAPPERS = ("torch.tensor", "Variable", "torch.autograd.Variable")

DEF_FORWARD = re.compile(r"def(?<!\wdef)\s+forward\s*\(")
LOSS_DEF_NAME = re.compile(r"loss|Loss|LOSS|criterion|Criterion")  # a function named like a loss
DEF_LOSS = re.compile(r"def(?<!\wdef)\s+\w*?(?:" + LOSS_DEF_NAME.pattern + ")")
DEF_FORWARD_OR_LOSS = re.compile(r"def(?<!\wdef)\s+(?:forward\s*\(|\w*?(?:" + LOSS_DEF_NAME.pattern + "))")
LIST_TO_TENSOR_CALL = re.compile(r"torch\.(?:cuda\.)?(?:tensor|as_tensor|Tensor|FloatTensor)\s*\(")
# `torch.tensor(aux_losses)`, `torch.Tensor(kept, device=d)`: a list copied, by its name, into a new tensor
NAMED_COPY = re.compile(r"torch\.(?:cuda\.)?(?:tensor|as_tensor|Tensor|FloatTensor)\s*\(\s*([A-Za-z_]\w*)\s*[,)]")
# `torch.tensor(self.log_probs, requires_grad=True)`: a list (a name, or an attribute) made a new leaf; the flag
# and the appends may sit on other lines (a call over several lines), so the scope's test is the two patterns.
_LEAF_ARGUMENT = r"\s*\(\s*(?:[A-Za-z_]\w*\s*\.\s*)*([A-Za-z_]\w*)\s*,"
NAMED_LEAF = re.compile(r"(?:torch\.(?:cuda\.)?(?:tensor|as_tensor)|V(?<!\wV)ariable)" + _LEAF_ARGUMENT)
# the same as two patterns that each start with a literal (searched faster: the prefilter runs them)
NAMED_LEAVES = (re.compile(r"torch\.(?:cuda\.)?(?:as_)?tensor" + _LEAF_ARGUMENT),
                re.compile(r"V(?<!\wV)ariable" + _LEAF_ARGUMENT))
LEAF_FLAG = re.compile(r"requires_grad\s*=\s*True")
# A function appending a distribution's value (`log_probs.append(pd.log_prob(a))`) to a list made a leaf elsewhere.
APPEND_CALL = re.compile(r"\.\s*append\s*\(")
DISTRIBUTION_VALUE = re.compile(r"\.\s*(?:log_prob|entropy|rsample)\s*\(")


class AppendedListText:
    """Necessary text of TL003's findings in a file that never back-propagates, about a list it appends to: a name
    both appended to (`aux.append(`) and copied into a new tensor by name (`torch.tensor(aux)`), with a module's
    `def forward(` returning it (a package of models builds tensors of constants in most forwards, rarely of a list
    it appends to: the test passes on those few files only) or a function named like a loss (`def calc_loss(`)
    computing its loss from a helper that returns it; or such a list, by its name or the last part of an attribute
    (`self.body.log_probs`), made a new leaf with `requires_grad=True`. Plain substring tests first: most files
    fail on `append`."""

    pattern = "def forward(/def ...loss...( ... NAME.append( ... torch.tensor(NAME) | requires_grad=True ... tensor(NAME,"
    parts = (DEF_FORWARD_OR_LOSS, NAMED_COPY, LEAF_FLAG, *NAMED_LEAVES)  # the patterns it runs (names' own are literals)

    def search(self, text: str) -> re.Match[str] | None:
        if "append" not in text:
            return None
        appended: dict[str, set[str]] | None = None
        d = DEF_FORWARD_OR_LOSS.search(text)
        # a forward, or a loss function in a file that takes a distribution's values (what its helper appends)
        if d is not None and (DEF_FORWARD.match(text, d.start()) or DEF_FORWARD.search(text, d.end())
                              or DISTRIBUTION_VALUE.search(text)):
            copies = list(NAMED_COPY.finditer(text))
            appended = _appended_names(text) if copies else {}
            found = next((m for m in copies if any(b != "." for b in appended.get(m.group(1), ()))), None)
            if found is not None:
                return found
        if "requires_grad" in text and LEAF_FLAG.search(text) is not None:
            appended = _appended_names(text) if not appended else appended
            for leaf in NAMED_LEAVES:
                for m in leaf.finditer(text):
                    if appended.get(m.group(1)) and _flag_in_call(text, m.end()):
                        return m
        return None


def _flag_in_call(text: str, start: int) -> bool:
    """Does the call whose arguments continue at `start` pass `requires_grad=True`? Its text up to the parenthesis
    that closes it; a quote in it (a parenthesis in a string would misplace the end) counts as yes."""
    depth = 1
    for i in range(start, len(text)):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                rest = text[start:i]
                return "'" in rest or '"' in rest or LEAF_FLAG.search(rest) is not None
    return True


APPEND_WORD = re.compile(r"append\s*\(")


def _appended_names(text: str) -> dict[str, set[str]]:
    """The names appended to in `text` (`name.append(`, `x.name . append (`), each with the characters found
    before it (`.` for an attribute's, `` at the start of the text): one pass over the word `append`."""
    out: dict[str, set[str]] = {}
    for a in APPEND_WORD.finditer(text):
        i = a.start() - 1
        while i >= 0 and text[i].isspace():
            i -= 1
        if i < 0 or text[i] != ".":
            continue
        i -= 1
        while i >= 0 and text[i].isspace():
            i -= 1
        end = i + 1
        while i >= 0 and (text[i].isalnum() or text[i] == "_"):
            i -= 1
        name = text[i + 1:end]
        if name and not name[0].isdigit():
            out.setdefault(name, set()).add(text[i] if i >= 0 else "")
    return out


APPENDED_LIST = AppendedListText()


@dataclass(frozen=True)
class CutForCallers:
    cut: Detachment  # `pred.data`
    param: str  # the parameter cut
    use: CallerUse  # a call passing a model's output for it and back-propagating what the cut computes


def cut_for_callers(model: FileModel, scope: Scope) -> Iterator[CutForCallers]:
    """A loss function with no backward of its own (`def rpn_loss(pred, target, w)`) that cuts one of its
    parameters (`pred.data`, `pred.detach()`) in computing an item it returns, where a caller in another project
    file passes a model's output for that parameter and back-propagates that item (`ProjectLookup.callers`): the
    term computed from the cut prediction trains nothing. Not a parameter the function rebinds first, nor where
    another model output (or the same) is used uncut in that item (a student beside its cut teacher), nor where the
    item runs a module of `self` or a parameter (a probe trained on a cut feature); not a cut only in an item the
    callers do not back-propagate (a count logged)."""
    node = scope.node
    if model.project is None or type(node) is not cst.FunctionDef or "." in scope.name \
            or not LOSS_NAME.search(scope.name) or scope.own_backwards():
        return
    uses = [u for u in model.project.callers(f"{scope.class_name}.{scope.name}" if scope.class_name else scope.name)
            if u.backpropagated and u.outputs]
    if not uses:
        return
    params = positional_params(node)[1 if scope.class_name else 0:]
    reported: set[int] = set()
    for r in scope.own_returns():
        value = r.value
        assert value is not None  # own_returns: each with a value
        items = [el.value for el in value.elements] if type(value) is cst.Tuple else [value]
        for i, item in enumerate(items):
            back = [u for u in uses if -1 in u.backpropagated or i in u.backpropagated]
            if not back:
                continue
            yield from _cut_terms(model, scope, params, item, r, back, reported)
            pairs = [(item, r)] + [(d.value, d) for d in scope.operand_defs(item, r) if d.value is not None]
            cut = [(det, at) for expr, at in pairs for n in walk(expr)
                   if (det := as_detachment(n)) is not None and det.how in (".data", ".detach()")
                   and type(det.operand) is cst.Name and det.operand.value in params
                   and scope.reaching(det.operand.value, at) == ((), True)]
            if not cut or any(type(n) is cst.Call and ((f := dotted(n.func) or "") in params
                              or f.startswith("self.") and f.count(".") == 1) for expr, _ in pairs for n in walk(expr)):
                continue  # a module the loss runs (`self.head(pred.detach())`, a probe) is what the cut value trains
            # not a use: the cut operands, and what only a shape is read of (`h, w = pred.size()[-2:]`)
            cut_ids = {id(det.operand) for det, _ in cut} | {
                id(n.value) for expr, _ in pairs for n in walk(expr)
                if type(n) is cst.Attribute and n.attr.value in SHAPE_READS}
            uncut = {n.value for expr, at in pairs for n in walk(expr) if type(n) is cst.Name
                     and id(n) not in cut_ids and n.value in params and scope.reaching(n.value, at) == ((), True)}
            for det, _ in cut:
                param = det.operand.value  # type: ignore[attr-defined]  # a Name (above)
                k = str(params.index(param))
                use = next((u for u in back if k in u.outputs or param in u.outputs), None)
                # another model output used uncut in the item (a student beside its cut teacher): a target, on purpose
                fed = {params[int(o)] if o.isdigit() and int(o) < len(params) else o for o in use.outputs} if use else set()
                if use is not None and not uncut & fed and id(det.node) not in reported:
                    reported.add(id(det.node))
                    yield CutForCallers(det, param, use)


def _cut_terms(model: FileModel, scope: Scope, params: list[str], item: cst.BaseExpression, r: Event,
               back: list[CallerUse], reported: set[int]) -> Iterator[CutForCallers]:
    """A term of the returned `item` (through sums, weights without graph and the function's own bindings) that is
    a criterion's value cut from its graph (`return l1 + 0.5 * l2.item()` with `l2 = F.mse_loss(pred, target)`),
    computed from a parameter a caller passes a model's output for and back-propagates the item: it trains nothing.
    (`param` of the result: the parameter it is computed from.)"""
    for expr, at in returned_terms(model, scope, item, r):
        for det in summand_detachments(expr, lambda e, at=at: may_carry_graph(model, scope, e, at)):
            if id(det.node) in reported or not _criterion_value(scope, det.operand, at):
                continue
            used = scope.depends(det.operand) & set(params)
            for u in back:
                fed = {params[int(o)] if o.isdigit() and int(o) < len(params) else o for o in u.outputs}
                if used & fed:
                    reported.add(id(det.node))
                    yield CutForCallers(det, sorted(used & fed)[0], u)
                    break


def may_carry_graph(model: FileModel, scope: Scope, expr: cst.BaseExpression, at: Event) -> bool:
    """Not known to be graph-free: in what a function returns to callers the analysis cannot see, a factor beside
    such a value is a weight (`-(logp * adv).mean()` with `adv = ret - value.detach()`), not a term. A setting read
    from the run's options (`args.kd_weight`, `cfg.alpha`) is a number."""
    name = dotted(expr) if type(expr) is cst.Attribute else None
    return not (name is not None and name.split(".", 1)[0] in OPTIONS_HOLDERS or model.kinds.of(expr, scope, at).graph_free)


def carries_graph(model: FileModel, scope: Scope, expr: cst.BaseExpression, at: Event) -> bool:
    """Known to carry a graph, or of unknown kind and named like a loss."""
    kind = model.kinds.of(expr, scope, at)
    return kind is VKind.GRAPH or (kind is VKind.UNKNOWN and scope.is_loss(expr))


def returned_terms(model: FileModel, scope: Scope, item: cst.BaseExpression,
                   r: Event) -> list[tuple[cst.BaseExpression, Event]]:
    """`item` (what the return `r` gives) and the values of the definitions of its terms, followed through the
    function's own bindings (`total = fit + reg.item(); return total`), a factor beside what may carry a graph
    being a weight (`may_carry_graph`): each with the event it is read at."""
    defs = scope.summand_defs(item, r, lambda e, at: summand_names(e, lambda x: may_carry_graph(model, scope, x, at)))
    return [(item, r)] + [(d.value, d) for d in defs if d.value is not None]


def _criterion_value(scope: Scope, x: cst.BaseExpression, at: Event) -> bool:
    """What a criterion computed: a call of one (`F.mse_loss(...)`, `criterion(...)`, by its name), a name every
    definition of which reaching `at` is such a call, or a name that says it is a loss."""
    if type(x) is cst.Call:
        return LOSS_NAME.search(dotted(x.func) or "") is not None
    if type(x) is not cst.Name:
        return False
    defs, entry = scope.reaching(x.value, at)
    return (bool(defs) and not entry and all(d.value is not None and _criterion_value(scope, d.value, d) for d in defs)
            ) or scope.is_loss(x)


def summand_detachments(expr: cst.BaseExpression, graph=lambda e: False) -> list[Detachment]:
    """Detachments that are terms of `expr`: added, or multiplied by a factor that carries no graph (a weight such
    as `args.alpha`); summed or stacked; not a factor next to a graph tensor (`ce * w.detach()` detaches the
    weight, not a loss) or next to one computing uncut with a value the product cuts (`pi.detach() * torch.log(pi)`,
    ACER's bias correction: the cut value had a graph), not an argument of other calls, nor the straight-through trick
    (`x + (q - x).detach()`: the value of `q` with the gradient of `x`). `graph(e)`: does `e` carry a graph."""
    found = as_detachment(expr)
    if found is not None:
        return [found]
    if type(expr) is cst.BinaryOperation:
        if type(expr.operator) in (cst.Add, cst.Subtract):
            left, right = summand_detachments(expr.left, graph), summand_detachments(expr.right, graph)
            return ([d for d in left if not _straight_through(d, expr.right)]
                    + [d for d in right if not _straight_through(d, expr.left)])
        if type(expr.operator) is cst.Multiply:
            cut = {dotted(d.operand) for d in cuts_within(expr)} - {None}
            heavy = lambda f, o: weighs(f, o, graph) or bool(cut & operand_names(f, graph_only=True))  # noqa: E731
            return ((summand_detachments(expr.left, graph) if not heavy(expr.right, expr.left) else [])
                    + (summand_detachments(expr.right, graph) if not heavy(expr.left, expr.right) else []))
        if type(expr.operator) is cst.Divide and not graph(expr.right):
            return summand_detachments(expr.left, graph)
    if type(expr) is cst.UnaryOperation:
        return summand_detachments(expr.expression, graph)
    if type(expr) is cst.List:
        # a list of terms, combined where it is used (`losses = [ce, aux.detach()]`, then `sum(losses)`); not a
        # tuple or a dict, records whose one entry is read (`out = (loss, logits.detach())`, then `out[0]`)
        return [d for el in expr.elements if type(el) is cst.Element for d in summand_detachments(el.value, graph)]
    if type(expr) is cst.Call:
        func = dotted(expr.func)
        if func in COMBINING_CALLS:
            return [d for arg in expr.args for item in combined_items(arg.value) for d in summand_detachments(item, graph)]
        if func in LIST_TO_TENSOR and expr.args and expr.args[0].keyword is None and not expr.args[0].star \
                and keyword(expr, "requires_grad") is None:  # (a new leaf is a re-wrapping: `rewrapped`)
            # `torch.tensor(reg.item())`, `torch.Tensor([a.item(), b.item()])`: the numbers copied into a new tensor
            return [d for item in combined_items(expr.args[0].value) for d in summand_detachments(item, graph)]
        if type(expr.func) is cst.Attribute and expr.func.attr.value in GRAPH_REDUCTIONS and not expr.args:
            return summand_detachments(expr.func.value, graph)
        if computes_numbers(func):
            # `np.mean(out.detach().cpu().numpy() ** 2)`, `torch.from_numpy(reg.detach().numpy())`: NumPy (or
            # `math`) computes plain numbers from the cut values, and whatever it returns has no graph either
            return [d for arg in expr.args for d in cuts_within(arg.value)]
    return []


def _straight_through(det: Detachment, other: cst.BaseExpression) -> bool:
    """`x + (q - x).detach()`, `x - (x - q).detach()`: what is cut is a difference with the value the other side
    of the sum adds uncut, so the sum has `q`'s value and `x`'s gradient, on purpose (a quantizer's or a hard
    sample's straight-through estimator); likewise `x - x.detach()`, zero with the gradient of `x`."""
    added, operand = dotted(other), det.operand
    return added is not None and (added == dotted(operand) or type(operand) is cst.BinaryOperation
                                  and type(operand.operator) is cst.Subtract
                                  and added in (dotted(operand.left), dotted(operand.right)))


def weighs(factor: cst.BaseExpression, other: cst.BaseExpression, graph) -> bool:
    """Is `other`, in the product `factor * other`, a weight of `factor` rather than a term of the loss: `factor`
    carries a graph, or `other` is computed from `factor` itself (`log_prob * (log_prob - baseline).detach()`: the
    score-function estimator differentiates `log_prob`, weighted by a value cut from the graph on purpose)."""
    if graph(factor):
        return True
    name = dotted(factor) if type(factor) in (cst.Name, cst.Attribute) else None
    return name is not None and name in names_in(other)


def learnable(model: FileModel, scope: Scope, expr: cst.BaseExpression, at, depth: int = 0) -> bool:
    """A tensor an optimizer trains: a leaf made to require grad (`torch.zeros(1, requires_grad=True)`, a helper's
    `zeros(1, requires_grad=True)`, `nn.Parameter(...)`), or computed from one elementwise (`self.log_alpha.exp()`,
    `-log_beta`), bound in this function or, for `self.x`, by every assignment of the class. A product of such a
    factor and a value cut from the graph trains the factor (SAC's temperature, a Lagrange multiplier's dual
    update): the cut value is its weight, not a term of the loss."""
    while True:
        if type(expr) is cst.UnaryOperation:
            expr = expr.expression
        elif type(expr) is cst.Call and type(expr.func) is cst.Attribute \
                and expr.func.attr.value in GRAPH_PRESERVING_METHODS:
            if not (dotted(expr.func) or "").startswith("torch."):
                expr = expr.func.value  # `self.log_beta.exp()`
            elif expr.args and expr.args[0].keyword is None:
                expr = expr.args[0].value  # `torch.exp(log_beta)`
            else:
                return False
        else:
            break
    if type(expr) is cst.Call:
        return _leaf_call(expr)
    name = dotted(expr)
    if name is None or depth > 2:
        return False
    if type(expr) is cst.Name:
        defs, entry = scope.reaching(name, at)
        return bool(defs) and not entry and all(
            d.value is not None and learnable(model, scope, d.value, d, depth + 1) for d in defs)
    values = bound_values(model, scope, name) if name.startswith("self.") and name.count(".") == 1 else None
    return bool(values) and all(type(v) is cst.Call and _leaf_call(v) for v in values)  # type: ignore[union-attr]


def _leaf_call(call: cst.Call) -> bool:
    """`f(..., requires_grad=True)` or `nn.Parameter(...)`: a new leaf that an optimizer is meant to train."""
    grad = keyword(call, "requires_grad")
    return (grad is not None and is_true(grad.value)) or (dotted(call.func) or "").rsplit(".", 1)[-1] == "Parameter"


def appended_graphs(model: FileModel, scope: Scope, arg: cst.BaseExpression,
                    distributions: bool = False) -> list[cst.BaseExpression]:
    """The values appended to the list `arg` that carry a graph (their kind), or are a distribution's `log_prob`,
    `entropy` or `rsample` (a policy's, whose parameters a model computed): for a name, the appends of this
    function; for an attribute (`self.body.log_probs`), the appends of any function of the file to an attribute of
    that name (`body.log_probs.append(pd.log_prob(a))` where the action is taken)."""
    name = dotted(arg)
    if name is None:
        return []
    if "." not in name:
        stores = [(scope, e) for e in scope.stores(name) if e.kind is EventKind.APPEND]
    else:
        tail = "." + name.rsplit(".", 1)[1]
        stores = [(s, e) for s in model.scopes for e in s.events if e.kind is EventKind.APPEND and e.scope is s.node
                  and e.target is not None and e.target.endswith(tail)]
    return [e.value for s, e in stores if e.value is not None and _graph_value(model, s, e.value, e, distributions)]


@dataclass(frozen=True)
class HelperCopy:
    call: cst.Call  # `torch.tensor(log_probs)` in the helper
    helper: Scope  # the helper returning it
    held: cst.BaseExpression  # a value appended to the list that carries a graph
    at: Event  # where the caller binds the helper's result


def copied_by_helpers(model: FileModel, scope: Scope, expr: cst.BaseExpression, at: Event) -> Iterator[HelperCopy]:
    """`log_probs = self.calc_log_probs(batch)` among the operands of `expr` (a loss), where that function of the
    file (not a forward, none that back-propagates) returns `torch.tensor(log_probs)` (itself, or a name bound to
    it) of a list it appends a distribution's values to (`log_prob`, `entropy`, `rsample`: what a policy gradient
    differentiates; other model outputs may be targets copied on purpose, `returns.append(r + gamma * v)`): the loss
    computed from it has no path to the policy. Not a call under `no_grad` (an old policy's log-probs, constants on
    purpose)."""
    for d in scope.operand_defs(expr, at):
        value = d.value
        if type(value) is not cst.Call or "no_grad" in d.contexts or "inference_mode" in d.contexts:
            continue
        name = dotted(value.func)
        if name is None or name.count(".") > name.startswith("self."):
            continue  # a function of the file, or a method of `self`
        callee = model.resolve(scope, name)
        if callee is None or callee is scope or callee.name == "forward" or callee.own_backwards():
            continue
        for r in callee.own_returns():
            assert r.value is not None  # own_returns: each with a value
            exprs = [r.value] + [x.value for x in callee.summand_defs(r.value, r) if x.value is not None]
            for e in exprs:
                for call in lists_to_tensor(e):
                    arg = call.args[0].value
                    held = appended_graphs(model, callee, arg, True) if type(arg) is cst.Name else []
                    if held:
                        yield HelperCopy(call, callee, held[0], d)


def _graph_value(model: FileModel, scope: Scope, value: cst.BaseExpression, at: Event, distributions: bool) -> bool:
    """Known to carry a graph (unless only `distributions` count), or a distribution's `log_prob(...)` /
    `entropy()` (itself, or the one definition of the name appended) of a receiver not known to hold none."""
    kind = model.kinds.of(value, scope, at)
    if kind is VKind.GRAPH and not distributions:
        return True
    if kind not in (VKind.UNKNOWN, VKind.GRAPH):
        return False
    if type(value) is cst.Name:
        defs, entry = scope.reaching(value.value, at)
        if len(defs) != 1 or entry or defs[0].value is None:
            return False
        value = defs[0].value
    return type(value) is cst.Call and type(value.func) is cst.Attribute \
        and value.func.attr.value in DISTRIBUTION_GRAPH_METHODS \
        and model.kinds.of(value.func.value, scope, at) in (VKind.UNKNOWN, VKind.GRAPH)


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


def rewrapped(expr: cst.BaseExpression) -> list[cst.Call]:
    """`torch.tensor(value, requires_grad=True)` (or `Variable(value, requires_grad=True)`) among the terms of
    `expr`: a new leaf made from a value, with no path back to the model."""
    def leaf(node: cst.Call) -> bool:
        if type(node.func) is cst.Attribute and node.func.attr.value == "requires_grad_":
            return rewrapped_value(node) is not node.func  # `loss.detach().requires_grad_()`
        grad = keyword(node, "requires_grad")
        return (dotted(node.func) or "") in TENSOR_REWRAPPERS and grad is not None and is_true(grad.value) \
            and bool(node.args) and node.args[0].keyword is None

    def through(node: cst.Call) -> cst.BaseExpression | None:
        reduces = type(node.func) is cst.Attribute and node.func.attr.value in GRAPH_REDUCTIONS and not node.args
        return node.func.value if reduces else None  # type: ignore[attr-defined]  # an Attribute when it reduces

    return term_calls(expr, leaf, through)


def rewrapped_value(call: cst.Call) -> cst.BaseExpression:
    """What a re-wrapping call makes a new leaf of: the first argument of `torch.tensor(v, requires_grad=True)`, or
    the detached value a `.requires_grad_()` (`.requires_grad_(True)`) is called on (`loss.detach().requires_grad_()`;
    on a value with a graph the call changes nothing). Else the call's function."""
    func = call.func
    if type(func) is cst.Attribute and func.attr.value == "requires_grad_":
        first = call.args[0] if call.args else None
        on = first is None or (first.keyword is None or first.keyword.value == "requires_grad") and is_true(first.value)
        return func.value if on and as_detachment(func.value) is not None else func
    return call.args[0].value if call.args else func


def written_graphs(model: FileModel, scope: Scope, value: cst.BaseExpression, at: Event) -> bool:
    """`[ce, kl]` written out, or a name every definition of which reaching `at` is such a list, with an item that
    carries a graph (`torch.tensor([ce, kl], requires_grad=True)` copies their values, not their graphs)."""
    written: list[tuple[cst.BaseExpression, Event]] = [(value, at)]
    if type(value) is cst.Name:
        defs, entry = scope.reaching(value.value, at)
        written = [(d.value, d) for d in defs if d.variant is AssignForm.PLAIN and d.value is not None]
        if entry or not defs or len(written) != len(defs):
            return False
    return any(type(v) in (cst.List, cst.Tuple) and any(carries_graph(model, scope, item, d) for item in combined_items(v))
               for v, d in written)


def in_new_tensor(expr: cst.BaseExpression, node: cst.CSTNode) -> bool:
    """Is `node` inside a call of `expr` that copies values into a new tensor (`torch.tensor(reg.item())`) or
    computes numbers from them (`np.mean(x.detach().numpy())`): there is no tensor to use in its place."""
    return any(any(n is node for n in walk(call)) for call in walk(expr)
               if type(call) is cst.Call and (dotted(call.func) in LIST_TO_TENSOR or computes_numbers(dotted(call.func))))


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
