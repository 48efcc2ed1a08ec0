"""TL003: a loss cut out of the graph (`.data`, `.item()`, `.detach()`, `float()`) and then added into the
value that is back-propagated. That term gets no gradient: the loss never improves, or backward fails with
"element 0 of tensors does not require grad and does not have a grad_fn".
"""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from torchlint.analysis import EventKind, Event, FileModel
from torchlint.analysis.cuts import (
    APPEND_CALL, APPENDED_LIST, COPYING_REWRAPPERS, DEF_FORWARD, DEF_LOSS, DISTRIBUTION_VALUE, LEAF_FLAG, LIST_TO_TENSOR_CALL,
    LOSS_DEF_NAME, NAMED_LEAF, NAMED_LEAVES, appended_graphs, carries_graph, copied_by_helpers, cut_for_callers, in_new_tensor,
    learnable, lists_to_tensor, may_carry_graph, rewrapped, rewrapped_value, summand_detachments, written_graphs,
)
from torchlint.analysis.factors import stabilizing_shift, whole_factors
from torchlint.analysis.terms import (
    CUT_ARGUMENT, calls_given, copied_names, cut_args, cut_from_trained_forward, cut_predictions, forward_cut,
    forward_sibling, hinged, log_probability, loss_function, module_call, module_output, returned_cuts, returns_cut,
    same_model, trained_by_another_backward,
)
from torchlint.analysis.parameters import PARAMETER_CUT_TEXT, SELF_CUT, cut_parameters
from torchlint.analysis.gradmode import cut_by_no_grad, from_trained_forward
from torchlint.analysis.vkind import VKind
from torchlint.analysis.exprs import added_terms, code_of, dotted, is_true, summand_names
from torchlint.source.walk import calls_in_evaluation_order, walk
from torchlint.diagnostic import Fix
from torchlint.rules.base import BACKWARD_CALL, Finding, Rule
from torchlint.verify.signs import Sign

DETACHING = re.compile(r"\.\s*(?:data\b|(?:item|detach|tolist)\s*\()|f(?<!\wf)loat\s*\(")  # (see rules.base on \b)
# A cut: a detaching wrapper, a list's values copied into a new tensor (`torch.tensor(losses)`), or a value computed
# under `no_grad` / `inference_mode`, a loss re-wrapped by `Variable(...)` or made a leaf (`loss.requires_grad = True`).
# A `return` that cuts a value (`return self.head(h).data`, `return logits, feats.detach()`).
FORWARD_CUT = re.compile(r"return\b[^\n]*\.(?:detach\(\s*\)|data\b)")  # (no leading \b: `re` then looks for "return")
CUT = re.compile(DETACHING.pattern + r"|torch\.(?:cuda\.)?(?:tensor|as_tensor|Tensor|FloatTensor)\s*\("
                 r"|no_grad|inference_mode|V(?<!\wV)ariable\s*\(|\.requires_grad\s*=\s*True")


class DetachedLossTerm(Rule):
    code = "TL003"
    name = "detached-loss-term"
    summary = "a detached loss (.data, .item(), .detach(), float()) is added into the back-propagated loss"
    fix_safety = "unsafe"
    # A backward whose loss has a detached term (no loop needed: one backward is enough).
    # Or a module's forward returning losses copied into a new tensor (`scope_alternatives`): in a file that never
    # back-propagates, only where a list appended to is copied by name (a package of models builds
    # `torch.tensor(...)` of constants in most forwards; reading every file with a forward and such a call would
    # parse most of them for one shape).
    # Or a list of values that carry a graph made a new leaf (`torch.tensor(self.log_probs, requires_grad=True)`):
    # in a file that never back-propagates, only a list it appends to (read by name) with the flag in the file.
    # Or a loss function (`def calc_loss(`) whose helper returns a list it appends to, copied by name.
    # Or a module's learnable parameter read only through a cut (`cut_parameters`: read from the whole text; the
    # method holding the cut is kept to point at).
    requires = ((BACKWARD_CALL, APPENDED_LIST, PARAMETER_CUT_TEXT), CUT)
    scope_requires = (BACKWARD_CALL, CUT)
    scope_alternatives = ((DEF_FORWARD, LIST_TO_TENSOR_CALL), (NAMED_LEAF, LEAF_FLAG), (APPEND_CALL, DISTRIBUTION_VALUE),
                          (DEF_LOSS, APPEND_CALL, LIST_TO_TENSOR_CALL), (SELF_CUT,))
    runtime_signs = (Sign.CUT_TERM_WITHOUT_GRADIENT,)
    runtime_same_line = True
    fix_promise = "the term now receives gradient: the backward reaches what this line computes"

    @classmethod
    def promise_kept(cls, line, original, fixed, monitored):
        # a cut is a sign only at the finding's line (the fix edits that expression in place)
        seen = [o for o in monitored["observations"]
                if o["code"] == cls.code and o["frames"] and o["frames"][-1][1] == line]
        return None if seen else cls.fix_promise

    doc = """
## What it flags
A loss value wrapped in `.data`, `.data[0]`, `.item()`, `.detach()`, `.tolist()` or `float(...)` that is then
added (as a summand) into a value that is back-propagated: `total = total + loss.data[0]` followed by
`total.backward()`, `losses.append(loss.item())` then `sum(losses).backward()`, `loss = a + b.detach()`. A chain of them, with
value-keeping calls between (`loss.detach().item()`, `loss.detach().cpu().numpy()`, `loss.data.item()`), is one
cut of the innermost value; the fix removes the whole chain.
A module's parameters carry a graph (`for p in model.parameters()`, or `named_parameters()`, in a comprehension too):
an L2 penalty summed from `p.norm(2).item()` adds a number to the loss and regularizes nothing (not under `no_grad`).
The detached term may be weighted by a factor without graph (`ce + args.alpha * aux.item()`), summed from a
generator (`sum(l.item() for l in losses)`) or stacked (`torch.stack([a.detach(), b]).sum()`). Also flagged: a
detached loss value re-wrapped as a new leaf, `torch.tensor(loss.item(), requires_grad=True)` or
`Variable(total.data, requires_grad=True)`, usually written to silence "element 0 of tensors does not require
grad": the backward stops at that leaf and no parameter gets a gradient. The same for a loss that still has its
graph: `Variable(loss, requires_grad=True)` and `torch.tensor(loss, requires_grad=True)` return a new leaf that
copies the value and drops the graph (Variable no longer returns its argument); so does `torch.tensor([ce, kl],
requires_grad=True)` of a list written out (or a name bound only to one) with an item that carries a graph, and
`loss.detach().requires_grad_()` (`.clone().detach().requires_grad_(True)`). A number read from the graph and copied
into a new tensor among the terms (`ce + torch.tensor(reg.item())`, `torch.FloatTensor([loss.item()])`) is a cut
term too, reported without a fix (the copy would cut `reg` itself), as is NumPy's result from a cut
(`torch.from_numpy(reg.detach().numpy())`); a list literal's items (`sum([ce, aux.detach()])`) and a dict's values
(`sum(parts.values())`) are terms. And `loss.requires_grad = True` on a back-propagated loss (not bound again before
its backward): PyTorch sets the flag only on a leaf (on a value with a graph the line raises), so where it runs the
loss holds no graph (`argmax`, `.numpy()`): nothing trains. And a helper of the same file that returns several
losses as a tuple with one of them detached (`return ce, reg.item()`), when the caller adds that item into the
back-propagated loss (`ce, reg = compute_losses(out, y)`; `loss = ce + 0.1 * reg`), or that returns a sum with a
detached term (`return l1 + l2.item()`, followed through the helper's own bindings) or with a criterion given only a
cut input (`cos_loss(t, s.detach())`, of the file if it runs no module), as does a loss module's `forward` (`crit =
SmoothLoss()` ... `loss = crit(out, y)`), when the caller back-propagates what it gets: reported in the helper,
without a fix (other callers may rely on getting a number). A factor beside a value it cannot show graph-free (but
an option, `args.w`) is a weight (`logp * (ret - v.detach())`).
A term computed under `torch.no_grad()` / `inference_mode()` from a forward the same function runs with grad (the model
it trains), then added into the back-propagated loss: `with torch.no_grad(): kl = logp - ref_logp`, then `loss = pg +
beta * kl.mean()` (every definition of the term is under `no_grad`, or, after the block, only reduces or weighs such
values: `kl_loss = beta * kl.mean()`). Likewise a term computed under `no_grad` from a tensor that carries a graph
(`with torch.no_grad(): emb = encoder(fake)` of the generator's `fake`), after the block through tensor operations
and criteria whose other inputs are a batch's data (`emb_loss = F.mse_loss(emb, c)` of `for z, c in loader`): run
with grad it would train what made `fake`. Reported once per term, nearest the backward. No fix.
An output of a forward read as a number (`.item()`, `float()`) and added into the loss, when another output of the
same call flows into the backward (`logits, aux = model(x)`; `loss = F.cross_entropy(logits, y) + 0.1 *
aux.mean().item()`): that call ran with grad, so `aux` carries the graph the number drops (not under `no_grad`; a
`.detach()`ed output beside it is left alone, the baseline of an actor-critic). A criterion among the terms whose
only input with a graph is a module's output it is given cut: `rec = F.mse_loss(out.detach(), y)` in `loss = rec +
reg` gives no gradient at all (not when another input carries a graph, `mse(student, teacher.detach())`, nor a
method of an object named like a loss, `D.compute_loss(fake.detach(), label)`, nor a function or method of the file,
`self.discriminator_loss(real.data, fake.data)`: either may run the critic on the cut sample). No fix.
The same when the cut is made in the `forward` of a module class of the file and the criterion is handed what it
returns: `F.mse_loss(feats, pos_feats)` of `logits, feats = model(x)` where every return is `logits,
feats.detach()`, or `F.mse_loss(model(x), y)` where `forward` returns `self.body(x).data` (a cut inside the
forward that a later layer reads, a frozen encoder, is not one). No fix.
A module's input cut in a loss that trains that input's producer through another term: `G_loss =
mse(D(fake.detach()), ones) + l1(fake, real)`, the generator's loss whose adversarial term reaches only `D` (a
module: known to be one, named like one, or an attribute of `self` bound to an instance of a class). No fix.
A critic's value of what the trained model just produced, cut and added into that model's loss: `q = critic(obs,
action)` with `action, logp = policy(obs)`, then `actor_loss = (alpha * logp - q.detach()).mean()` (SAC's actor):
the term is a constant, and the actor gets no gradient through the critic. Only a term added into the loss (not a
weight beside a value that may carry a graph: an actor-critic's baseline), computed by another model handed the
output of a forward that the uncut part of the loss computes with too; not `q - q.detach()` (zero, with `q`'s
gradient, on purpose). No cut term is reported in a sum that goes through a hinge before the loss (`gap[gap > 0]`,
`F.relu(gap)`, `gap.clamp(min=0)`): there the cut value is the hinge's threshold (`bad.max(1)[0].detach() + margin
- good.max(1)[0]`), held fixed on purpose.
Losses copied into a new tensor, `torch.tensor(losses)` / `torch.Tensor([rec_loss, kl_loss])` (through
`torch.mean(...)`, `.sum()`, `.to(device)`), where the list holds values that carry a graph (a list literal of
them, or a list they are appended to): as a term of the back-propagated loss, or returned by a module's `forward`
(a method `forward` of a class with a base), whose outputs its caller trains on. In a file that never
back-propagates (a package of models, whose forwards mostly build `torch.tensor(...)` of constants), only a list
the file appends to and copies by name (`aux.append(l)` ... `torch.tensor(aux)`) is followed, not a list literal.
The new tensor holds the values, not the graphs: use `torch.stack(losses)`. Reported without a fix. A returned
name bound to a sum with such a copy among its terms is followed (`extra = torch.tensor(aux).mean()`; `loss = mse +
beta * extra`; `return out, loss`), and a list named like a loss (`aux_loss`) holds losses unless what is appended
is known to be a number. A copy bound to a name that a term reads through `+ -`, a power, a reduction or a loss
function's arguments (`V = torch.Tensor(values)`, then `(returns - V).pow(2).mean()`; not in a product, where a cut
copy may be a baseline's weight) also counts the other outputs of a forward whose first feeds the backward
(`logits, value = net(s)`, `value = value.view(-1)`, `values.append(value)`) as values with a graph.
A list of values that carry a graph made a new leaf, `torch.tensor(self.log_probs, requires_grad=True)` (or
`Variable(...)`), anywhere, with or without a backward in the file (the flag says it is meant to be
differentiated): the list is appended, in the same function, with values known to carry a graph, or, for an
attribute, in any function of the file to an attribute of that name (`body.log_probs.append(pd.log_prob(a))`
where the action is taken), with a distribution's `log_prob(...)`, `entropy()` or `rsample()` (a policy's, whose
parameters the model computed). The leaf copies the values and drops the graphs: no parameter is trained by a loss
built from it. Not a list of numbers (`.item()`, literals), nor a copy without the flag; another file's appends are
not read, nor, in a file long enough to be pruned, a function appending model outputs (not a distribution's
values) away from the function that makes the leaf. Reported without a fix (`torch.stack(...)`).
A function of the file (not a forward, none that back-propagates) that returns such a copy without the flag,
`return torch.tensor(log_probs)` of a list it appends graph values to (as above), when a loss is computed from its
result: a back-propagated one, or what a function named like a loss returns (`def calc_loss(...)`: `log_probs =
self.calc_log_probs(batch)` ... `return loss`), and the list holds a distribution's values (`log_prob`, `entropy`,
`rsample`: what a policy gradient differentiates; a list of other model outputs may be targets, copied on purpose,
`returns.append(r + gamma * v)`). Reported once, at the copy in the helper, without a fix. Not a call
under `no_grad` (an old policy's log-probs, constants on purpose), nor a result used by a function that neither
back-propagates nor is named like a loss; a call inside the loss's expression itself (not bound to a name) is
not followed.
A loss function with no backward of its own (a file of losses) that cuts one of its parameters (`pred.data`,
`pred.detach()`) in computing an item it returns, when a file of the project near it calls it with a model's
output for that parameter (bound by calling a model object: `a, b = rpn(features)`) and back-propagates that
item (`cls, reg, log = rpn_loss(...)`; `(cls + reg).backward()`): reported in the loss function, without a fix.
Not a cut of a target (what the caller passes comes from a function, or from data), nor in an item only logged,
nor where every caller runs under `no_grad`, passes a value already cut, or does not exist; nor where another
model output is used uncut in the same item (`kl(student, teacher.detach())`: a target on purpose), nor where the
item runs a module of `self` or one passed in (`head(feat.detach())`: a probe). Likewise a criterion's value the
loss function cuts among the terms of what it returns (`l2 = F.mse_loss(pred, target)`; `return l1 + 0.5 *
l2.item()`), computed from a parameter such a caller passes a model's output for (a caller's parameter named as a
module, `def train(model, loader)`, is a model object); not a detached weight (`ce * w.detach()`).
A learnable parameter of a module class of the file (`self.pos_embed = nn.Parameter(...)` in `__init__`, on a
branch its arguments' defaults take, or under a test of something else when no other value is bound to it) that the
class's `forward` (or a method it calls) computes with through a cut (`x + self.pos_embed.type_as(x).clone().detach()`,
`torch.matmul(x, self.weight.data)`: an operand of arithmetic, or an argument beside another value, not a value only
handed on), and no method reads otherwise: no loss reaches it, so it
keeps its initial value while the rest trains (in a file of models too, with no backward; the whole source is read).
Not one built with `requires_grad=False` or frozen by its flag in the file, one updated by hand (`self.center.data
= ...`, an in-place method: a running statistic), one read whole outside set-up methods (`__init__`, `init*`,
`reset*`, `load*`; a test, `if self.pos_embed is not None:`, is no read), nor in a class with no `forward` or that
another class of the file derives from (a base others complete), nor one read cut only by a function with no gradient
for it (`torch.bucketize(pitch, self.bins.detach())`: bucket edges), nor one whose branch its defaults do not take
beside a fixed table bound on the other (`if learnable_pos:` with `learnable_pos=False`, `else: self.pos_embed =
sinusoid_table(n, d)`: the cut is written for the table). Reported at the first cut, without a fix.

## Why it is wrong
Those wrappers return a value outside the autograd graph. Added into the total, the term contributes nothing to
the gradients: the model does not learn from it ("the loss stays the same"), or, when every term is detached,
backward fails with

    RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn

Old (pre-0.4) code used `loss.data[0]` to read a loss; copied into a total that is back-propagated, it silently
cuts the graph.

## Example
```python
total_loss = total_loss + loss.data[0]   # TL003
...
total_loss.backward()
```

## Fix
Remove the wrapper where the value flows into a backward (`loss.data[0]` → `loss`, `loss.item()` → `loss`).
**Unsafe**: gradients now flow through that term (which is the intent). Keep `.item()` for logging totals.

## Correct look-alikes (not flagged)
`running_loss += loss.item()` used only for printing; `fake.detach()` in a GAN discriminator loss (not a loss);
a detached loss used as a multiplicative weight (`w = loss_b.detach() / loss_a.detach()`).

```python
running_loss = 0.0
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    running_loss += loss.item()     # only printed, never back-propagated
print(running_loss)
```

Under `no_grad`, the output of a model the function never runs with grad (a reference or target network) from the
batch's data, a criterion of it beside an input of unknown origin (a student's features beside a teacher's), a
value subtracted from or beside a graph tensor (`q - target`, `log_prob * (ret - old_value)`), or inside another
function (`torch.exp(new_logp - old_logp)`): a target, baseline or weight meant as a constant.

The straight-through estimator, `z + (q - z).detach()` or `x - (x - q).detach()` (the value of `q`, the gradient of
`z`: a quantizer's or a hard sample's trick), in the loop or in a module's `forward`.
`D(fake.detach())` in the critic's own loss (nothing else in it uses `fake`), or in a sum of both players'
losses where `D(fake)` also appears; a cut input of a function, not a module (`cos(p, z.detach())`).

`torch.tensor(history).mean()` of kept losses only printed; `torch.tensor(seen)` of values read with `.item()`;
a forward that returns `torch.tensor(lengths)` (numbers); a `forward` of a class without a base.

`loss.backward(); loss = loss.item()`: the rebinding comes after the backward (only the definitions that reach
the backward are read); a detached recurrent state fed into the model (an input, not a term of the loss).

A detached value that multiplies a graph tensor is a weight, not a term (`ce * w.detach()`, `ce / scale` with `scale =
args.gamma * ce.detach()`), and so is one computed from the factor it multiplies, whatever that factor's kind
(`log_prob * (log_prob - baseline).detach()`, the score-function estimator) or a log-probability (`adv.detach() *
dist.log_prob(a)`), and one multiplying a leaf an optimizer trains or a value computed from it elementwise
(`self.log_beta.exp() * (kl - eps).detach()`, `log_beta` made with `requires_grad=True` or an `nn.Parameter`: a
temperature or a Lagrange multiplier updated against a gap cut on purpose; not a loss weighted so,
`torch.exp(-log_var) * ce.detach()`, still a term); the cut factor of a loss back-propagated as one product (`-(logp *
adv.detach()).mean()`: the backward needs the other factor's graph); a learnable scalar made with `torch.tensor(0.0,
requires_grad=True)`; an input re-wrapped with `requires_grad=True` and fed to the model (adversarial examples). A
value cut from what another backward of the same step trains: the critic's prediction in an actor's `advantage =
(target - pred_value).detach()` next to `value_loss.backward()`, a value network's baseline `q - v_pred.detach()` next
to `vf_loss.backward()` (its own loss trains it; the cut keeps this loss from training it too). The log-sum-exp trick,
`x - m.detach()` with `m` the `max`, `amax` or `logsumexp` of `x` (no softmax changes).

## Limits
Only terms are checked, through arithmetic, sums and stacks; the detached value must be known to carry a graph
(its kind), or, when its kind is unknown, be named like a loss or be the result of a call of a criterion or loss
function (`feature_crit(s, t).detach()`). A helper's returned terms are followed only into a function of the same file.
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        cuts = ".detach()" in model.text or ".data" in model.text  # else no argument is cut (`D(fake.detach())`)
        # `F.mse_loss(out.detach(), y)`, or a forward that returns a cut value (`return logits, feats.detach()`)
        cut_argument = cuts and (CUT_ARGUMENT.search(model.text) is not None
                                 or FORWARD_CUT.search(model.text) is not None and returns_cut(model))
        copies = LIST_TO_TENSOR_CALL.search(model.text) is not None  # else no forward returns a copy
        appends = ".append" in (text := model.text)
        # else no list is made a leaf; no helper returns a copy of a list of a distribution's values
        leaves = appends and "requires_grad" in text and any(p.search(text) for p in NAMED_LEAVES)
        helpers = copies and appends and DISTRIBUTION_VALUE.search(text) is not None
        reported: set[int] = set()  # copies in helpers, each reported once
        for p in cut_parameters(model) if cuts else ():
            yield Finding(p.cut, f"`{p.attr}` is a learnable `nn.Parameter` of `{p.cls}`, but every read of it is cut from "
                          f"the graph (`{code_of(p.cut)}`): it never gets a gradient and keeps its initial value while "
                          f"the model trains; use `{p.attr}` itself (or make it a buffer if it is meant to stay fixed)")
        for scope in model.scopes:
            if copies:
                yield from _forward_list_findings(model, scope)
            if leaves:
                yield from _list_leaf_findings(model, scope)
            backwards = scope.own_backwards()
            if helpers and not backwards and LOSS_DEF_NAME.search(scope.name):
                for r in scope.own_returns():  # a loss function of the file (`calc_loss`): what it returns is a loss
                    yield from _helper_copy_findings(model, scope, r.value, r, reported)  # type: ignore[arg-type]
            if not backwards:
                for c in cut_for_callers(model, scope) if cuts and model.project is not None else ():
                    u, cut = c.use, code_of(c.cut.operand)
                    what = f"`{c.param}`" if cut == c.param else f"`{cut}` (computed from `{c.param}`)"
                    yield Finding(c.cut.node, f"`{code_of(c.cut.node)}` cuts {what} out of the graph ({c.cut.how}) in "
                                  f"`{scope.name}()`, yet {u.path}:{u.line} passes a model's output for `{c.param}` and back-"
                                  f"propagates what this computes (line {u.backward_line}): the term trains nothing; use `{cut}` itself")
                continue
            candidates: list[tuple[cst.BaseExpression, Event]] = []
            owner: dict[int, Event] = {}  # the backward each candidate expression is first found for
            seen: set[int] = set()
            tuple_items: list[Event] = []  # definitions of the loss's terms (`ce, reg = helper(...)`)
            seen_defs: set[int] = set()

            whole: set[int] = set()  # factors of a loss back-propagated as one product: one carries its graph

            def graph(x, at, scope=scope):  # (a log-probability beside a cut value: the cut is its weight)
                return carries_graph(model, scope, x, at) or log_probability(scope, x, at) \
                    or id(x) in whole and may_carry_graph(model, scope, x, at)
            terms = lambda e, at: summand_names(e, lambda x: graph(x, at))  # noqa: E731

            for b in backwards:
                assert b.value is not None  # a backward always has its value
                whole |= whole_factors(scope, b)
                # Only the definitions that reach the backward: `loss.backward(); loss = loss.item()` is fine.
                defs = scope.summand_defs(b.value, b, terms)
                for d in defs:
                    if id(d) not in seen_defs:
                        seen_defs.add(id(d))
                        tuple_items.append(d)
                pairs = [(b.value, b)] + [(d.value, d) for d in defs if d.value is not None]
                for expr, at in pairs:
                    if id(expr) not in seen:
                        seen.add(id(expr))
                        candidates.append((expr, at))
                        owner[id(expr)] = b
            no_grad = any("no_grad" in e.contexts for e in scope.events)  # else no term was computed under it
            cut_roots: set[int] = set()  # a term's no_grad definitions, reported once (nearest the backward)
            for expr, at in candidates:
                yield from _rewrap_findings(model, scope, expr, at)
                if no_grad:
                    yield from _no_grad_findings(model, scope, expr, at, cut_roots)
                yield from _list_findings(model, scope, expr, at, "is added into a loss that is back-propagated")
                if cut_argument:
                    yield from _cut_prediction_findings(model, scope, expr, at)
                if helpers:
                    yield from _helper_copy_findings(model, scope, expr, at, reported)
                dets = summand_detachments(expr, lambda e, at=at: graph(e, at))
                # a gap weighting a learned leaf (a dual variable's update); a loss weighted by one is still a term
                weights = {id(d.node) for d in dets} - {id(d.node) for d in summand_detachments(
                    expr, lambda e, at=at: carries_graph(model, scope, e, at) or learnable(model, scope, e, at))
                } if dets else set()
                for det in dets:
                    through = not (carries_graph(model, scope, det.operand, at) or det.how in _AS_NUMBER
                                   and forward_sibling(model, scope, det.operand, at, module_call))
                    if through and not cut_from_trained_forward(model, scope, det, expr, at):
                        continue  # what is detached is not known to carry a graph (a count, a statistic)
                    if id(det.node) in weights and not scope.is_loss(det.operand):
                        continue
                    if trained_by_another_backward(scope, det.operand, owner[id(expr)], backwards) or hinged(scope, at) \
                            or stabilizing_shift(scope, det, expr, at):
                        continue  # a baseline or critic cut on purpose: its own loss trains it; a hinge's threshold
                    operand = code_of(det.operand)
                    yield Finding(
                        det.node,
                        f"`{code_of(det.node)}` cuts `{operand}` out of the graph ({det.how}), yet it is added into a "
                        + ("loss that is back-propagated: this term gets no gradient (loss never improves, or 'element "
                           "0 of tensors does not require grad')" if not through else
                           f"loss that trains the model `{operand}` is computed from: the term is a constant, and that "
                           "model gets no gradient through it"),
                        None if in_new_tensor(expr, det.node)  # `torch.tensor(reg.item())`: no tensor to use
                        else Fix("unsafe", f"use `{operand}` itself", ((det.node, det.operand),)),
                    )
            for d in tuple_items:
                yield from _helper_item_findings(model, scope, d)
            for b in backwards:
                yield from _made_leaf_findings(model, scope, b)
            if cuts and _holds_cut_argument(model, scope):
                for b in backwards:
                    yield from _cut_input_findings(model, scope, b)


def _made_leaf_findings(model: FileModel, scope, b: Event) -> Iterator[Finding]:
    """`loss.requires_grad = True`, then `loss.backward()` (no binding of `loss` between): PyTorch sets the flag only
    on a leaf (on a value with a graph it raises), so the loss holds no graph and backward() reaches no parameter."""
    if type(b.value) is not cst.Name:
        return
    flags = [f for f in scope.assignments(f"{b.value.value}.requires_grad")
             if f.value is not None and is_true(f.value) and f.seq < b.seq and scope.may_follow(f, b)]
    if not flags:
        return  # (the cheap question first: the definitions are read only for a loss made a leaf)
    reaching, _ = scope.reaching(b.value.value, b)
    caught = {id(n) for t in walk(scope.node) if type(t) is cst.Try and any(h.type is None or dotted(h.type) in (
        "RuntimeError", "Exception") for h in t.handlers) for n in walk(t.body)}  # (`except RuntimeError`: it may raise)
    flags = [f for f in flags if all(d.seq < f.seq for d in reaching) and id(f.stmt) not in caught]
    defs = [d.value for d in scope.summand_defs(b.value, b) if d.value is not None]
    if any(lists_to_tensor(v) or rewrapped(v) for v in defs):
        return  # the copy into a new tensor is reported where it is made
    for flag in flags:
        yield Finding(flag.stmt, f"`{code_of(flag.stmt).strip()}` works only on a leaf (on a value with a graph the line "
                      f"raises), so where it runs `{b.value.value}` holds no graph: `{code_of(b.node)}` reaches no parameter "
                      f"and nothing trains (this silences 'element 0 of tensors does not require grad' instead of fixing "
                      f"it); compute the loss with torch operations on the model's output")


def _helper_item_findings(model: FileModel, scope, d: Event) -> Iterator[Finding]:
    """`ce, reg = compute_losses(out, y)` where the helper returns `(ce, reg.item())`, or `loss = crit(out, y)`
    where the loss module's `forward` returns `mse + 0.1 * smooth.detach()`, and the result is a term of the
    back-propagated loss (`cuts.returned_cuts`). Reported in the helper, at the detachment (no fix: other callers
    may rely on getting a number)."""
    for found in returned_cuts(model, scope, d):
        det, callee, crit = found.cut, found.callee, found.criterion
        name, x = ("forward" if callee.name == "forward" and callee.class_name else callee.name), code_of(det.operand)
        cut = (f"`{code_of(det.node)}` cuts `{x}` out of the graph ({det.how}) before `{name}()` returns it" if crit is None
               else f"`{code_of(det.node)}` is the only input with a graph of `{code_of(crit.func)}` in what `{name}()` "
               f"returns, and it is cut ({det.how})")
        yield Finding(det.node, f"{cut}, and the caller adds it into a loss that is back-propagated (as `{d.target}`): "
                      f"this term gets no gradient; {'return' if crit is None else 'pass'} `{x}` itself")


def _cut_input_findings(model: FileModel, scope, b: Event) -> Iterator[Finding]:
    """`D(fake.detach())` computing a term of a loss that trains `fake`'s producer through another term
    (`G_loss = mse(D(fake.detach()), ones) + l1(fake, real)`): the adversarial term reaches only `D`, never the
    generator. Not when the same module also gets `fake` attached in that loss (a sum of both players' losses),
    nor when nothing else in the loss uses `fake` (the discriminator's own loss)."""
    assert b.value is not None  # own_backwards: each with a value
    defs = [d for d in scope.operand_defs(b.value, b) if d.value is not None]
    values: list[tuple[cst.BaseExpression, Event]] = [(b.value, b)] + [(d.value, d) for d in defs]
    for value, at in values:
        for call in (n for n in walk(value) if type(n) is cst.Call):
            func = dotted(call.func)
            cut = cut_args(call)
            if func is None or not cut or not module_call(model, scope, call, at):
                continue  # the cheap tests first: most calls are handed no cut value
            for det in cut:
                x = dotted(det.operand)
                if x is None or not module_output(model, scope, det.operand, at) or same_model(scope, func, x, at):
                    continue
                uses = [(c, v) for v, a in values if not scope.exclusive(a, at) for c in calls_given(v, x)]
                if uses and not any(dotted(n.func) == func and any(dotted(a.value) == x for a in n.args)
                                    for v, _ in values for n in walk(v) if type(n) is cst.Call):
                    yield Finding(
                        det.node,
                        f"`{code_of(det.node)}` is cut from the graph before `{func}` reads it, yet the "
                        f"back-propagated loss also trains `{x}` through `{code_of(uses[0][0].func)}`: the term "
                        f"computed by `{func}` gives `{x}`'s producer no gradient; pass `{x}` itself",
                    )


def _cut_prediction_findings(model: FileModel, scope, expr: cst.BaseExpression, at: Event) -> Iterator[Finding]:
    """`rec = F.mse_loss(out.detach(), y)` a term of the back-propagated loss (`terms.cut_predictions`). Not a
    function or method of the file, which may run a trained module itself (a critic's loss of a cut sample)."""
    def criterion(name: str) -> bool:
        return loss_function(name) and model.resolve(scope, name) is None

    for call, det in cut_predictions(expr, lambda e: carries_graph(model, scope, e, at), criterion,
                                     lambda e: module_output(model, scope, e, at),
                                     lambda e: forward_cut(model, scope, e, at)):
        x = code_of(det.operand)
        remedy = f"return `{x}` uncut" if "forward" in det.how else f"pass `{x}` itself"
        yield Finding(det.node, f"`{code_of(det.node)}` is the only input with a graph of `{code_of(call.func)}`, and "
                      f"it is cut ({det.how}), yet that term is added into a loss that is back-propagated: it gives "
                      f"no gradient to what computed `{x}`; {remedy}")


def _holds_cut_argument(model: FileModel, scope) -> bool:
    """A value the function binds or back-propagates calls a module with a cut argument, and a name cut there is
    handed itself to a loss function in such a value (`l1(fake, real)`): only those values are what
    `_cut_input_findings` reads (a walk of the events' values, not of the whole body). The syntactic tests first."""
    pairs = [(n, e) for e in scope.events if e.scope is scope.node and e.value is not None
             for n in calls_in_evaluation_order(e.value)]
    cut = {dotted(d.operand) for n, _ in pairs for d in cut_args(n)} - {None}
    return bool(cut) and any(dotted(a.value) in cut and loss_function(dotted(n.func) or "") for n, _ in pairs
                             for a in n.args) and any(cut_args(n) and module_call(model, scope, n, e) for n, e in pairs)


def _no_grad_findings(model: FileModel, scope, expr: cst.BaseExpression, at: Event, reported: set[int]) -> Iterator[Finding]:
    """A term added into the loss that was computed under `no_grad` from a forward the function also runs with
    grad (`kl = logp - ref_logp` under it, then `loss = pg_loss + beta * kl.mean()`), or from a tensor with a graph
    (`gradmode.cut_by_no_grad`): the term is a constant, and the penalty it stands for trains nothing. Only added
    terms: a difference (`q - target`) or a factor beside a graph tensor is a target, baseline or weight."""
    def graph(e: cst.BaseExpression) -> bool:
        return carries_graph(model, scope, e, at) or from_trained_forward(model, scope, e, at)
    for term in added_terms(expr, graph):
        name = dotted(term.value if type(term) is cst.Subscript else term)
        defs = cut_by_no_grad(model, scope, name, at) if name is not None else ()
        if defs and not reported & {id(d) for d in defs}:
            reported.update(id(d) for d in defs)
            yield Finding(
                term,
                f"`{code_of(term)}` is computed under `torch.no_grad()` (`{defs[0].target}` is bound there) from the model "
                f"this function trains or a tensor with its graph, so it carries no graph, yet it is added into a loss "
                f"that is back-propagated: this term gets no gradient; compute it outside `no_grad`",
            )


def _rewrap_findings(model: FileModel, scope, expr: cst.BaseExpression, at: Event) -> Iterator[Finding]:
    """A detached loss re-wrapped as a new leaf (`torch.tensor(loss.item(), requires_grad=True)`): no parameter."""
    for call in rewrapped(expr):
        value = rewrapped_value(call)
        detached = summand_detachments(value) + [
            d for defn in scope.summand_defs(value, at) if defn.value is not None
            for d in summand_detachments(defn.value)
        ]
        if not detached:
            listed = written_graphs(model, scope, value, at)
            if (dotted(call.func) or "") in COPYING_REWRAPPERS and (listed or carries_graph(model, scope, value, at)):
                # `Variable(loss, requires_grad=True)`: a new leaf of the loss's value, without its graph
                yield Finding(
                    call,
                    f"`{code_of(call)}` copies `{code_of(value)}` into a new leaf tensor, without its graph: "
                    f"backward() stops there and no parameter gets a gradient; " + (
                        "combine them with `torch.stack(...)` instead" if listed
                        else f"back-propagate `{code_of(value)}` itself"),
                )
            for defn in scope.summand_defs(value, at):  # `loss = torch.tensor(losses).sum()`, then `Variable(loss)`
                yield from _list_findings(model, scope, defn.value, defn, "is re-wrapped as the back-propagated loss")
            continue  # a learnable scalar made on purpose (`log_var = torch.tensor(0.0, requires_grad=True)`)
        yield Finding(
            call,
            f"`{code_of(call)}` re-wraps `{code_of(detached[0].node)}` as a new leaf tensor: backward() stops there "
            f"and no parameter gets a gradient (this silences 'element 0 of tensors does not require grad' "
            f"instead of fixing it); back-propagate the loss itself",
        )


def _helper_copy_findings(model: FileModel, scope, expr: cst.BaseExpression, at: Event,
                          reported: set[int]) -> Iterator[Finding]:
    """A helper of the file returning `torch.tensor(log_probs)` of graph values, whose result the loss `expr` is
    computed from: reported in the helper, once."""
    for c in copied_by_helpers(model, scope, expr, at):
        if id(c.call) not in reported:
            reported.add(id(c.call))
            yield Finding(
                c.call,
                f"`{code_of(c.call)}` copies the values of `{code_of(c.held)}` into a new tensor, which "
                f"`{c.helper.name}()` returns to `{scope.name}()` for a loss: it has no "
                f"graph, so that loss trains nothing through it; combine them with `torch.stack(...)` instead",
            )


def _list_leaf_findings(model: FileModel, scope) -> Iterator[Finding]:
    """`torch.tensor(self.log_probs, requires_grad=True)` of a list appended with values that carry a graph (a
    policy's `log_prob`s, `entropy()`s, model outputs): the new leaf copies their values and drops their graphs,
    so a loss built from it trains no parameter (the flag only silences "element 0 of tensors does not require
    grad"). With or without a backward in the file: the flag says the value is meant to be differentiated."""
    for e in scope.events:
        if e.scope is not scope.node or e.value is None or e.kind not in (EventKind.ASSIGN, EventKind.RETURN):
            continue
        for call in rewrapped(e.value):
            arg = rewrapped_value(call)
            if type(arg) not in (cst.Name, cst.Attribute) or (dotted(call.func) or "") not in COPYING_REWRAPPERS:
                continue
            held = appended_graphs(model, scope, arg)
            if held:
                yield Finding(
                    call,
                    f"`{code_of(call)}` copies the values of `{code_of(held[0])}` (appended to `{code_of(arg)}`) "
                    f"into a new leaf tensor, without their graphs: a loss built from it trains no parameter (the "
                    f"flag only silences 'element 0 of tensors does not require grad'); use `torch.stack("
                    f"{code_of(arg)})`",
                )


def _forward_list_findings(model: FileModel, scope) -> Iterator[Finding]:
    """A module's `forward` that returns losses copied into a new tensor (`return out, torch.tensor(aux).mean()`):
    the caller trains on what forward returns, and that output has no graph. A `forward` of a class with a base
    (an nn.Module of this file, of the project or of a library) counts as a module's."""
    node = scope.node
    if type(node) is not cst.FunctionDef or node.name.value != "forward" or not scope.class_name:
        return
    cls = model.classes.get(scope.class_name)
    if cls is None or not (cls.bases or model.is_module_class(scope.class_name)):
        return
    for r in scope.own_returns():
        value = r.value
        items = [el.value for el in value.elements] if type(value) is cst.Tuple else [value]
        for item in items:
            # the item itself, or a name bound to a sum with the copy among its terms (`loss = mse + b * aux`)
            for expr, at in [(item, r)] + [(d.value, d) for d in scope.summand_defs(item, r) if d.value is not None]:
                yield from _list_findings(model, scope, expr, at, "is returned by the module's forward")


def _list_findings(model: FileModel, scope, expr: cst.BaseExpression, at: Event, where: str) -> Iterator[Finding]:
    """`torch.tensor(losses)` among the terms of `expr`, where `losses` holds values that carry a graph (a list
    literal of them, or a list they are appended to): the new tensor holds their values, not their graphs."""
    by_name = copied_names(scope, expr, at)  # (a forward's other output counts there, not in a product: a weight)
    for call in lists_to_tensor(expr) + by_name:
        arg = call.args[0].value
        if type(arg) in (cst.List, cst.Tuple):
            held = [el.value for el in arg.elements if type(el) is cst.Element]  # type: ignore[attr-defined]
            losses = [e for e in held if carries_graph(model, scope, e, at)]
        elif type(arg) is cst.Name:
            # what is appended carries a graph, or, into a list named like a loss, is not known to be a number
            named = scope.is_loss(arg)
            losses = [s.value for s in scope.stores(arg.value) if s.value is not None and s.kind is EventKind.APPEND
                      and (carries_graph(model, scope, s.value, s)
                           or call in by_name and forward_sibling(model, scope, s.value, s, module_call)
                           or named and model.kinds.of(s.value, scope, s) is VKind.UNKNOWN)]
            for d in scope.summand_defs(arg, at):  # `losses = [crit(h, y) for h in heads]`, `losses = [ce, kl]`
                if type(d.value) is cst.ListComp and carries_graph(model, scope, d.value.elt, d):
                    losses.append(d.value.elt)
                elif type(d.value) in (cst.List, cst.Tuple):
                    losses += [el.value for el in d.value.elements
                               if type(el) is cst.Element and carries_graph(model, scope, el.value, d)]
        else:
            continue
        if not losses:
            continue  # numbers (`torch.tensor(lengths)`), or values already read with `.item()`
        yield Finding(call, f"`{code_of(call)}` copies the values of `{code_of(losses[0])}` and the rest into a new tensor, "
                      f"which {where}: it has no graph, so these losses train nothing; combine them with `torch.stack(...)` instead")


# Cuts that make a Python number: never a tensor baseline or target weighing a graph (those are `.detach()`ed).
_AS_NUMBER = (".item()", "float()", ".tolist()", ".data[...]")
