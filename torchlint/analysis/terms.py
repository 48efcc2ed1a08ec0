"""What the terms of a back-propagated loss hold beyond the loss's own expression: a term a function of the file cut
in what it returns to the caller (`returned_cuts`: `return l1 + l2.item()`, a loss module's `forward`), and a
forward's output known to carry a graph by the use of another output of the same call (`forward_sibling`), and a
criterion among the terms whose only input with a graph is cut (`cut_predictions`: `F.mse_loss(out.detach(), y)`,
or what a module's `forward` returns cut: `forward_cut`).
A layer above `cuts`, whose detachments it reads."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from torchlint.analysis.bindings import bound_values
from torchlint.analysis.cuts import carries_graph, lists_to_tensor, may_carry_graph, returned_terms, summand_detachments
from torchlint.analysis.events import AssignForm, Event, EventKind
from torchlint.analysis.factors import stabilizing_shift
from torchlint.analysis.exprs import (
    Detachment, as_detachment, dotted, names_in, operand_names, positional_params, term_leaves,
)
from torchlint.analysis.model import FileModel
from torchlint.analysis.scopes import Scope
from torchlint.analysis.semantics import (
    ACCUMULATION_NAME, DIVIDING_METHODS, GRAPH_PRESERVING_METHODS, LOSS_FUNCTION_WORDS, NUMERIC_MODULES, READING_CALLS,
    computes_loss, is_callable_name, is_module_name,
)
from torchlint.analysis.vkind import VKind
from torchlint.source.walk import walk


@dataclass(frozen=True)
class ReturnedCut:
    """A term a function of the file cut from its graph in what it returns (`return ce, reg.item()`, `return mse
    + 0.1 * smooth.detach()`), for a caller that adds the result into the loss it back-propagates."""

    cut: Detachment
    callee: Scope
    criterion: cst.Call | None = None  # the criterion whose only input with a graph is the cut (`cos_loss(t, s.detach())`)


def returned_cuts(model: FileModel, scope: Scope, d: Event) -> Iterator[ReturnedCut]:
    """`d` binds a term of a loss `scope` back-propagates to what a function of the file returns: the whole value
    (`loss = compute_loss(model, x, y)`; `loss = crit(out, y)` with `crit` a module of a class of the file, its
    `forward`) or an item of a returned tuple (`ce, reg = compute_losses(out, y)`). The terms of that value the
    function cut from their graphs (followed through its own definitions, `total = mse + reg.item(); return
    total`) give no gradient to this caller. A detached factor beside a graph is a weight (`summand_detachments`);
    a function that back-propagates itself is judged in its own scope."""
    if d.kind is not EventKind.ASSIGN or type(d.value) is not cst.Call:
        return
    whole = d.variant is AssignForm.PLAIN
    if not whole and (d.variant not in (AssignForm.UNPACK_FIRST, AssignForm.UNPACK) or d.index < 0):
        return
    call = d.value
    callee = _returning_callee(model, scope, dotted(call.func) or "")
    if callee is None or callee.own_backwards():
        return

    for r in callee.own_returns():
        value = r.value
        if whole:
            item = value
        elif type(value) in (cst.Tuple, cst.List) and d.index < len(value.elements):  # type: ignore[union-attr]
            item = value.elements[d.index].value  # type: ignore[union-attr]
        else:
            continue
        assert item is not None  # own_returns: each with a value

        # (an item of a returned tuple: not what is stored into it by key, `logs["kl"] = kl.item()`, beside the
        # entry the caller reads, `out["loss"]`)
        for expr, at in [t for t in returned_terms(model, callee, item, r)
                         if whole or t[1].variant is not AssignForm.ITEM]:
            for det in summand_detachments(expr, lambda e, at=at: may_carry_graph(model, callee, e, at)):
                if (carries_graph(model, callee, det.operand, at) or _from_graph_argument(
                        model, scope, d, callee, det.operand, call)) and not stabilizing_shift(callee, det, expr, at):
                    yield ReturnedCut(det, callee)
            if ".detach()" in model.text or ".data" in model.text:
                for crit, det in cut_predictions(
                        expr, lambda e, at=at: carries_graph(model, callee, e, at),
                        lambda name: _pure_criterion(model, callee, name),
                        lambda e, at=at: module_output(model, callee, e, at) or not _under_no_grad(callee, e, at)
                        and _from_graph_argument(model, scope, d, callee, e, call)):
                    yield ReturnedCut(det, callee, crit)


def _under_no_grad(scope: Scope, x: cst.BaseExpression, at: Event) -> bool:
    defs = scope.reaching(x.value, at)[0] if type(x) is cst.Name else ()
    return bool(defs) and all("no_grad" in d.contexts for d in defs)


def _pure_criterion(model: FileModel, scope: Scope, name: str) -> bool:
    """A criterion by its name that runs no module: torch's, or a function of the file that computes with tensor
    functions and methods only (`def cos_loss(a, b): return 1 - F.cosine_similarity(a, b).mean()`): an input it is
    given cut gives no gradient through it."""
    if not loss_function(name):
        return False
    found = model.resolve(scope, name)
    if found is None:
        return True
    if type(found.node) is not cst.FunctionDef or found.class_name or found.own_backwards():
        return False
    for n in walk(found.node.body):
        if type(n) is cst.Call:
            func = dotted(n.func) or ""
            root = func.split(".", 1)[0]
            if not (root in NUMERIC_MODULES and "." in func or func in READING_CALLS
                    or type(n.func) is cst.Attribute and root != "self"):
                return False  # a function or module the criterion runs (`self.critic(x)`, `helper(x)`)
    return True


def _returning_callee(model: FileModel, scope: Scope, func: str) -> Scope | None:
    """The function of the file a call of `func` runs: one it names, an object's `__call__`, or the `forward` of
    a module of a class of the file held by a name that says it is a loss (`crit = DualLoss()` ... `crit(out, y)`)."""
    if not func:
        return None
    found = model.kinds.callee(scope, func)
    last = func.rpartition(".")[2].lower()
    if found is None and func.count(".") == (1 if func.startswith("self.") else 0) and any(
            w in last for w in LOSS_FUNCTION_WORDS):  # (a loss module by its name: `crit`, `self.loss_fn`)
        cls = model.receivers.class_of(scope, func)
        if cls is not None and model.is_module_class(cls):
            found = model.resolve(scope, f"{func}.forward")
    return found


def _from_graph_argument(model: FileModel, scope: Scope, at: Event, callee: Scope, operand: cst.BaseExpression,
                         call: cst.Call) -> bool:
    """Does `operand` (in the helper) come from a parameter that the call passes a graph tensor, or a module the
    helper runs (`out = model(batch)`)? The helper's own kinds cannot know what its parameters hold."""
    node = callee.node
    if type(node) is not cst.FunctionDef:
        return False
    params = positional_params(node)[1 if callee.class_name else 0:]
    used = callee.depends(operand)
    for i, arg in enumerate(call.args):
        if arg.star or (arg.keyword is None and i >= len(params)):
            return False
        name = arg.keyword.value if arg.keyword is not None else params[i]
        if name not in used:
            continue
        kind = model.kinds.of(arg.value, scope, at)
        if kind is VKind.GRAPH:
            return True
        called = any(type(n) is cst.Call and dotted(n.func) == name for n in walk(node.body))
        if called and (kind is VKind.MODULE or (kind is VKind.UNKNOWN and is_module_name(dotted(arg.value) or ""))):
            return True
    return False


def forward_sibling(model: FileModel, scope: Scope, expr: cst.BaseExpression, at: Event, module_call,
                    depth: int = 0) -> bool:
    """`aux` (or `aux.mean()`, `aux[0]`) of `logits, aux = model(x)`, where another name that call binds flows into
    a backward of the function: the forward ran with grad, so its tensor outputs carry the graph too (known by
    use, whatever the model's class). Every definition reaching `at` is such an item, outside `no_grad`, or is
    one reshaped (`aux = aux.view(-1)`). `module_call(model, scope, call, at)` says whether a call runs a module."""
    root = expr
    while True:
        if type(root) is cst.Call and type(root.func) is cst.Attribute and root.func.attr.value in GRAPH_PRESERVING_METHODS:
            root = root.func.value
        elif type(root) is cst.Subscript:
            root = root.value
        else:
            break
    if type(root) is not cst.Name:
        return False
    defs, entry = scope.reaching(root.value, at)
    if entry or not defs:
        return False
    backpropagated = scope.backpropagated()
    for d in defs:
        if d.variant is AssignForm.PLAIN and d.value is not None and type(d.value) is not cst.Name and depth < 3:
            if forward_sibling(model, scope, d.value, d, module_call, depth + 1):
                continue
            return False
        if (d.variant not in (AssignForm.UNPACK_FIRST, AssignForm.UNPACK) or type(d.value) is not cst.Call
                or "no_grad" in d.contexts or not module_call(model, scope, d.value, d)):
            return False
        siblings = {e.target for e in scope.events if e.stmt is d.stmt and e.kind is EventKind.ASSIGN} - {root.value}
        if not siblings & backpropagated:
            return False
    return True


def cut_predictions(expr: cst.BaseExpression, graph, loss_function, module_output,
                    cut_elsewhere=None) -> Iterator[tuple[cst.Call, Detachment]]:
    """A criterion that is a term of `expr` (`rec` of `rec + reg`, through sums, weights without graph, a
    reduction) whose only input with a graph is a module's output it is given cut: `F.mse_loss(out.detach(), y)`.
    The term gives no gradient at all (a student beside its cut teacher, `kl(s, t.detach())`, or a BYOL
    prediction beside its cut target, has another input with a graph and is not one). `graph(e)`: does `e` carry
    a graph; `loss_function(name)`: is it a criterion's name; `module_output(e)`: is `e` what a module returned;
    `cut_elsewhere(e)`: the detachment, made out of sight, that an input `e` is (`forward_cut`), or None."""
    for call in (t for t in term_leaves(expr, graph, differences=True) if type(t) is cst.Call):
        inputs = [a.value for a in call.args if a.keyword is None or a.keyword.value in _INPUT_KEYWORDS]
        cut = [d for x in inputs if type(x) in (cst.Call, cst.Attribute) and (d := as_detachment(x)) is not None
               and d.how in (".detach()", ".data")]
        if cut_elsewhere is not None and not cut:
            cut = [d for x in inputs if type(x) in (cst.Name, cst.Call) and (d := cut_elsewhere(x)) is not None]
            outside = {id(d.node) for d in cut}
        else:
            outside = set()
        func = (dotted(call.func) or "") if cut else ""
        receiver = func.rpartition(".")[0]
        if not cut or receiver not in ("", "self", "F", "torch", "nn.functional", "torch.nn.functional") \
                or not loss_function(func):
            continue  # (no cut input; a method of an object: `D.compute_loss(fake.detach(), label)` runs the critic)
        cut = [d for d in cut if id(d.node) in outside or module_output(d.operand)]
        if cut and all(any(x is d.node for d in cut) or not (graph(x) or module_output(x)) for x in inputs):
            yield call, cut[0]


def forward_cut(model: FileModel, scope: Scope, x: cst.BaseExpression, at: Event) -> Detachment | None:
    """`x` is what the `forward` of a module class of the file returns cut from its graph: `model(x)` whose forward
    ends `return self.head(h).data`, or `feats` of `logits, feats = model(x)` where it returns `logits,
    feats.detach()` (every return; every definition of `feats` reaching `at`). The detachment returned stands for
    `x` itself (`node` is `x`, `operand` what the forward cut)."""
    index = -1
    call: cst.BaseExpression | None = x
    if type(x) is cst.Name:
        defs, entry = scope.reaching(x.value, at)
        if entry or len(defs) != 1 or defs[0].kind is not EventKind.ASSIGN or type(defs[0].value) is not cst.Call:
            return None
        d = defs[0]
        if d.variant in (AssignForm.UNPACK_FIRST, AssignForm.UNPACK) and d.index >= 0:
            index = d.index
        elif d.variant is not AssignForm.PLAIN:
            return None
        call = d.value
    func = dotted(call.func) if type(call) is cst.Call else None
    cls = model.receivers.class_of(scope, func) if func else None
    forward = model.resolve(scope, f"{func}.forward") if cls is not None and model.is_module_class(cls) else None
    if forward is None:
        return None
    found = None
    for r in forward.own_returns():
        item = r.value
        if index >= 0:
            if type(item) is not cst.Tuple or index >= len(item.elements):
                return None
            item = item.elements[index].value
        det = as_detachment(item) if item is not None and type(item) in (cst.Call, cst.Attribute) else None
        if det is None or det.how not in (".detach()", ".data") or not carries_graph(model, forward, det.operand, r):
            return None
        found = found or Detachment(x, det.operand, f"{det.how} in `{func}`'s forward")
    return found


def returns_cut(model: FileModel) -> bool:
    """Some `forward` of a module class of the file returns a value it cuts (whole, or an item of a tuple): only
    then may `forward_cut` find anything (asked once per file)."""
    for scope in model.scopes:
        if scope.name != "forward" or not scope.class_name or not model.is_module_class(scope.class_name):
            continue
        for r in scope.own_returns():
            items = [el.value for el in r.value.elements] if type(r.value) is cst.Tuple else [r.value]
            if any(i is not None and type(i) in (cst.Call, cst.Attribute) and as_detachment(i) is not None for i in items):
                return True
    return False


# A value cut right where it is handed to a criterion (`mse(out.detach(), y)`, `crit(pred.data, t)`): the text
# `cut_predictions` needs
CUT_ARGUMENT = re.compile(r"(?:loss|crit|mse|l1|bce|nll|kl_div|cross_entropy|huber)\w*\s*\((?:[^()\n]*,)?\s*"
                          r"[\w.\[\]]+\.(?:detach\(\s*\)|data)\s*[,)]")
# The keywords a criterion takes its tensors by (`F.mse_loss(input=..., target=...)`); the others are options.
_INPUT_KEYWORDS = ("input", "target", "pred", "preds", "prediction", "output", "x", "y")


def cut_args(call: cst.Call) -> list[Detachment]:
    """The arguments of `call` cut from the graph with `.detach()` or `.data` (`D(fake.detach(), y)`)."""
    return [d for a in call.args if (d := as_detachment(a.value)) is not None and d.how in (".detach()", ".data")]


def module_call(model: FileModel, scope: Scope, call: cst.Call, at: Event) -> bool:
    """A call of a module that is not a criterion: known to be one, named like one, or an attribute of `self`
    bound only to instances of a class (`self.d = Discriminator(...)` in `__init__`) whose name is not a loss's."""
    func = dotted(call.func) or ""
    if loss_function(func):
        return False
    if model.kinds.of(call.func, scope, at) is VKind.MODULE or (is_module_name(func) and "." not in func):
        return True
    values = bound_values(model, scope, func) if func.startswith("self.") and func.count(".") == 1 else None
    return bool(values) and all(
        type(v) is cst.Call and (c := dotted(v.func)) is not None and c.rsplit(".", 1)[-1][:1].isupper()
        and not any(w in c.lower() for w in LOSS_FUNCTION_WORDS) for v in values)  # type: ignore[union-attr]


def module_output(model: FileModel, scope: Scope, x: cst.BaseExpression, at: Event) -> bool:
    """Known to carry a graph, or bound (every definition reaching `at`) to what a module returns with grad (not
    under `no_grad`: a teacher's output there has no graph)."""
    kind = model.kinds.of(x, scope, at)
    if kind is not VKind.UNKNOWN or type(x) is not cst.Name:
        return kind is VKind.GRAPH
    defs, entry = scope.reaching(x.value, at)
    return bool(defs) and not entry and all(
        type(d.value) is cst.Call and "no_grad" not in d.contexts and module_call(model, scope, d.value, d) for d in defs)


def loss_function(func: str) -> bool:
    """`F.l1_loss`, `criterion`, `self.recon_crit`, `mse`: a name that says it computes a loss."""
    return is_callable_name(func) or any(w in func.lower() for w in LOSS_FUNCTION_WORDS)


def copied_names(scope: Scope, expr: cst.BaseExpression, at: Event) -> list[cst.Call]:
    """The copies into a new tensor that names among the terms of `expr` (through `+ -`, powers, reductions and a
    loss function's arguments; not a product, where a copy is a weight) hold by every definition reaching `at`:
    `V = torch.Tensor(values)`, then `(returns - V).pow(2).mean()` or `F.mse_loss(V, returns)`."""
    out, todo = [], [expr]
    while todo:
        node = todo.pop()
        if type(node) is cst.BinaryOperation and type(node.operator) in (cst.Add, cst.Subtract, cst.Power):
            todo += [node.left, node.right]
        elif type(node) is cst.UnaryOperation:
            todo.append(node.expression)
        elif type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in ("pow", "mean", "sum"):
            todo.append(node.func.value)
        elif type(node) is cst.Call and computes_loss(dotted(node.func) or ""):
            todo += [a.value for a in node.args if a.keyword is None]
        elif type(node) is cst.Name and (defs := scope.reaching(node.value, at)[0]):
            copies = [lists_to_tensor(d.value) if d.value is not None else [] for d in defs]
            out += [c[0] for c in copies if c] if all(copies) else []
    return out


_LOG_PROBABILITY = frozenset({"log", "log_prob", "log_softmax", "logsigmoid"})


def log_probability(scope: Scope, x: cst.BaseExpression, at: Event) -> bool:
    """`x` computes a log-probability (`torch.log(pi)`, `dist.log_prob(a)`, `F.log_softmax(z)`), itself or through
    every binding of the name reaching `at`: beside a value cut from the graph in a product, the score-function
    estimator (REINFORCE, actor-critic: `adv.detach() * log_pi`) differentiates it, weighted by the cut value."""
    def computes(e: cst.CSTNode) -> bool:  # (a helper named for what it returns too: `calc_log_probs(out, a)`)
        return any(type(n) is cst.Call and ((name := (n.func.attr.value if type(n.func) is cst.Attribute else dotted(
            n.func)) or "") in _LOG_PROBABILITY or "log_prob" in name) for n in walk(e))
    if type(x) is cst.Name:
        defs, entry = scope.reaching(x.value, at)
        return bool(defs) and not entry and all(d.value is not None and computes(d.value) for d in defs)
    return computes(x)


def cut_from_trained_forward(model: FileModel, scope: Scope, det: Detachment, loss: cst.BaseExpression,
                             at: Event) -> bool:
    """What is cut is computed from the output of a forward (`action, logp = policy(obs)`; `q = critic(obs,
    action)`) that the uncut part of the same loss also computes with (`alpha * logp`): the loss trains that model,
    and the cut takes away the path through which this term would train it too (SAC's actor loss `(alpha * logp -
    q.detach()).mean()`: the actor gets no gradient from the critic). Only a term added into the loss: not one
    beside a factor that may carry a graph (`-(log_probs * advantage.detach()).mean()`, an actor-critic's
    baseline), nor when the uncut part holds the cut value itself (`s - s.detach()`: zero with `s`'s gradient).
    The cut value must come through another model handed that output (the critic): one computed from the output by
    tensor operations alone (`bad.max(1)[0].detach() + margin - good.max(1)[0]`, X-DER's hinge) is a threshold the
    loss holds fixed on purpose."""
    if all(d.node is not det.node for d in summand_detachments(loss, lambda e: may_carry_graph(model, scope, e, at))):
        return False
    operand = det.operand
    defs = scope.operand_defs(operand, at)
    forwards = {id(d.value): d.target for d in defs
                if type(d.value) is cst.Call and model.kinds.of(d.value, scope, d) is VKind.GRAPH}
    outputs = {t for t in forwards.values() if t}
    if not outputs or not any(_handed(n, outputs) for v in [operand, *(d.value for d in defs)] if v is not None
                              for n in walk(v)):
        return False
    uncut = lambda e, _at: operand_names(e, graph_only=True)  # noqa: E731
    if names_in(operand) & uncut(loss, at):
        return False
    return any(id(d.value) in forwards for d in scope.summand_defs(loss, at, uncut))


_HINGES = frozenset({"relu", "relu_", "clamp", "clamp_", "clamp_min", "clip", "maximum", "softplus"})


def hinged(scope: Scope, at: Event) -> bool:
    """The sum `at` binds goes through a hinge before the loss: compared with a threshold (`mask = gap > 0`, then
    `gap[mask].mean()`) or clamped (`F.relu(gap)`, `gap.clamp(min=0)`). A cut term there is the hinge's threshold,
    held fixed on purpose (`bad.max(1)[0].detach() + margin - good.max(1)[0]`): it decides where the hinge is active."""
    target = at.target if at.kind is EventKind.ASSIGN else None
    if not target or "." in target:
        return False
    masks = {e.target for e in scope.events if e.target and type(e.value) is cst.Comparison and target in names_in(e.value)}
    for n in walk(scope.node):
        if type(n) is cst.Subscript and dotted(n.value) == target and any(
                type(m) is cst.Comparison and target in names_in(m) or type(m) is cst.Name and m.value in masks
                for el in n.slice for m in walk(el)):
            return True  # `gap[gap > 0]`, `gap[mask]` with `mask = gap > 0`
        if type(n) is cst.Call and (dotted(n.func) or "").rsplit(".", 1)[-1] in _HINGES and target in names_in(n):
            return True
    return False


def _handed(node: cst.CSTNode, outputs: set[str]) -> bool:
    """A call of something other than torch's functions or a tensor's methods (a model: `critic(obs, action)`,
    `self.qf["q1"](obs, action)`) given one of a forward's `outputs`."""
    if type(node) is not cst.Call or type(node.func) is cst.Attribute and not (dotted(node.func) or "").startswith("self."):
        return False
    name = dotted(node.func) or ""
    return not name.startswith(("torch.", "F.", "nn.")) and any(
        names_in(a.value) & outputs for a in node.args)


def trained_by_another_backward(scope: Scope, operand: cst.BaseExpression, b: Event, backwards: list[Event]) -> bool:
    """What is detached is computed from a value that another backward of the function back-propagates (the critic's
    `pred_value` of `value_loss.backward()`, cut in the actor's `advantage = (target - pred_value).detach()`; a
    value network's baseline `q - v_pred.detach()` with its own `vf_loss`): it gets its gradients from its own loss,
    and is detached so that this loss does not train it too. Only the function's own values count (not `self` or
    a network both losses call), and only a backward in the same loops (one step of two networks)."""
    own = {name for name in names_in(operand) if scope.assignments(name)}
    if not own:
        return False
    mine = scope.depends(b.value) if b.value is not None else frozenset()
    for other in backwards:
        if other is b or other.value is None or other.loops != b.loops:
            continue  # a loss back-propagated in each iteration, then a total of its items after: not a baseline
        theirs = scope.depends(other.value)
        if own & theirs and not mine <= theirs:
            return True
    return False


def disjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`a or b or c` -> [a, b, c]; any other test -> [test]."""
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.Or:
        return disjuncts(test.left) + disjuncts(test.right)
    return [test]


def call_divisor(call: cst.Call) -> cst.BaseExpression | None:
    """The divisor of a division written as a call: `loss.div(k)`, `loss.div_(k)`, `torch.div(loss, k)`."""
    if type(call.func) is not cst.Attribute or call.func.attr.value not in DIVIDING_METHODS:
        return None
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    index = 1 if dotted(call.func.value) == "torch" else 0
    return positional[index] if len(positional) > index else None


def plus_terms(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of a chain of `+` and `-` (`a + b / k - c` -> [a, b / k, c]); any other expression -> [expr]."""
    if type(expr) is cst.BinaryOperation and type(expr.operator) in (cst.Add, cst.Subtract):
        return plus_terms(expr.left) + plus_terms(expr.right)
    return [expr]


def inverted_window_factors(scope: Scope) -> Iterator[tuple[cst.BinaryOperation, str]]:
    """Terms added into a back-propagated total multiplied by an accumulation setting that divides the total's
    other terms (`total += part * self.accum_iters` on one branch, `total += part / self.accum_iters` on another):
    the product, and the setting as written. A slip that weighs that term k*k times its siblings."""
    divided: dict[str, set[str]] = {}
    multiplied: dict[str, list[tuple[cst.BinaryOperation, str]]] = {}
    for e in scope.raw:
        value = e.value
        if not (e.kind is EventKind.ASSIGN and e.accumulates and e.target) or type(value) is not cst.BinaryOperation:
            continue
        if type(value.operator) is cst.Divide and ACCUMULATION_NAME.search(k := dotted(value.right) or ""):
            divided.setdefault(e.target, set()).add(k)
        elif type(value.operator) is cst.Multiply:
            for side in (value.left, value.right):
                if ACCUMULATION_NAME.search(k := dotted(side) or ""):
                    multiplied.setdefault(e.target, []).append((value, k))
    backpropagated = scope.backpropagated() if multiplied else frozenset()
    for target, products in multiplied.items():
        if target in backpropagated:
            yield from ((node, k) for node, k in products if k in divided.get(target, ()))


def same_model(scope: Scope, func: str, x: str, at: Event) -> bool:
    """The module reading the cut value belongs to the model that produced it (`rec = model.decoder(z)`, then
    `model(rec.detach())`): the term trains that model's other parts on the cut sample (an encoder judging its own
    reconstructions), by design; the cut only keeps it from reaching back through the producer."""
    def root(name: str) -> str:
        parts = name.split(".")
        return ".".join(parts[:2]) if parts[0] == "self" and len(parts) > 1 else parts[0]

    defs, _ = scope.reaching(x, at)
    made = {root(f) for d in defs if type(d.value) is cst.Call and (f := dotted(d.value.func))}
    return root(func) in made


def calls_given(value: cst.BaseExpression, x: str) -> list[cst.Call]:
    """The criteria and loss functions in `value` handed `x` itself (not cut): `F.l1_loss(fake, real)`, a term
    that trains what made `x` (another module reading `x` may be the critic's own business)."""
    return [n for n in walk(value) if type(n) is cst.Call and any(dotted(a.value) == x for a in n.args)
            and loss_function(dotted(n.func) or "")]
