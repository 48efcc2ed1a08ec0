"""TL004: a loop steps an optimizer after backward() but never clears that optimizer's gradients.

backward() adds into `.grad`, so every step applies the sum of all gradients so far: training diverges or
behaves as if the learning rate kept growing.
"""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from torchlint.analysis import AssignForm, Event, EventKind, FileModel, Loop, StepVia
from torchlint.analysis.clearing import clears, first_pass_only, optional_guard, reaches_step
from torchlint.analysis.engines import engine_iterations, run_by_callers
from torchlint.analysis.exprs import code_of, modulo_test, names_in
from torchlint.diagnostic import Fix
from torchlint.fixes import insert_after
from torchlint.rules.base import BACKWARD_CALL, STEP_CALL, Finding, Rule, where
from torchlint.verify.signs import Sign


# A window test with a remainder other than 0 (`i % k == 1`), read from the text before any event is asked for.
REMAINDER_TEST = re.compile(r"%[^\n=]*==\s*[1-9]|[1-9]\s*==[^\n%]*%")


class MissingZeroGrad(Rule):
    code = "TL004"
    name = "missing-zero-grad"
    summary = "optimizer.step() in a loop whose gradients are never cleared"
    fix_safety = "unsafe"
    requires = (BACKWARD_CALL, STEP_CALL)  # no loop: an engine's update function runs in the engine's loop
    runtime_signs = (Sign.STALE_GRADIENT,)
    runtime_same_line = True
    fix_promise = "each step's gradient is now what its own backward brought (nothing left from the step before)"
    doc = """
## What it flags
A loop that calls an optimizer's `step()` (or `scaler.step(optimizer)`, or torch_xla's
`xm.optimizer_step(optimizer)`, which all-reduces the gradients and steps it) after a backward, where nothing in the
loop clears that optimizer's gradients: no `optimizer.zero_grad()`, no `model.zero_grad()` of a model it
optimizes (any model's, for an optimizer the function is handed as a parameter: which parameters it holds is not
known there; any sub-module's of `self`, `self.net.zero_grad()`, for one built over `self.parameters()`), no
`p.grad = None` / `p.grad.zero_()`, also looking into closures (`optimizer.step(closure)`, \
or the one closure a function or method of the file
builds and returns: `optimizer.step(self.make_closure(x, y))`, or `closure = self.make_closure(x, y)` then
`optimizer.step(closure)`) and
helper functions called from the loop: of the same file, and, with project analysis (the command, pre-commit;
flake8 and the editor once the command has cached them), functions imported from other files of the project and
methods inherited from base classes there, and methods of objects whose class is known (`trainer =
Trainer(...)` then `trainer.train_step(x)`; `self.engine = Engine(...)` in `__init__` then
`self.engine.step(batch)`; a class of the file or of the project), calling a module of known class, which runs its
`forward` (`model(x)` where `forward` starts with `self.zero_grad()`: the model's gradients are cleared, not
those of another module's optimizer). Helpers are placed two calls deep; below that, the clearings of a helper's
helpers are still followed two calls further (`self._train_step()` calling `self._reset_grad()`). An object bound
to a factory's result or to two classes is not followed, and stays an unknown call. One finding per optimizer and loop, on its `step()` (on
the call, when the step is in a helper of another file, whose file and line the message names).
An ignite engine's process function (`Engine(update)`, `Engine(process_function=update)`, a method handed to a
subclass of `Engine` or to its `super().__init__(...)`: `MyEngine(MyEngine.train)`, `super().__init__(self._step)`)
is one iteration of the engine's loop, which never clears gradients itself: it is checked as a loop, unless another
function of the file clears that optimizer (an event handler, `@trainer.on(Events.ITERATION_STARTED)`).
Also flagged: a clearing that sits only on the other arm of a condition nothing in the loop changes (`if
args.amp: optimizer.zero_grad(); scaler.step(optimizer)` / `else: optimizer.step()`): the plain arm never clears.
A condition the loop changes (`if i % 2 == 0:`, a flag it assigns, a call) is taken as clearing, except the
loop's counter compared equal to its start (`if i == 0: optimizer.zero_grad()` over `enumerate(loader)` or
`range(n)`, alone or in an `and`), which holds in the first pass only: a step outside that guard is reported.
Also a copy of the counter the loop's body makes before the test, unconditionally and to nothing else (`k = i`
then `if k == 0:`; `self.batch_index = i` then a method of `self` that tests `self.batch_index == 0`).
Not followed: a first-pass flag (`if first:`), a counter a helper receives as a parameter.
Also flagged, with project analysis (the command, pre-commit), on the method's first backward before the step: a
training-step method of a class (`def step(self, batch)` that back-propagates and steps an optimizer the object holds,
`self.opt` or `self.critic.optimizer`, outside any loop of its own, with no clearing of that optimizer before the
step, nor in any other function of its file) that no function of its
file calls, and that another project file runs once per iteration of a loop that clears no gradients: the caller
imports the class from the method's file (or from a package's `__init__` that imports it from there), binds a name
to an instance of it and to nothing else (`gan = GAN(...)`), and calls the method on it in the loop (`gan.step(data)`;
also through another method of the class nothing in the file calls, such as `__call__`). Not when that loop calls
some `zero_grad()`, writes a `.grad`, or hands the instance to another call; nor a method of the same name on an
object of another class, or of a class of the same name imported from elsewhere.
Also flagged: a clearing only under a presence test of an object that may be None (`if self.scheduler:`, `if ema
is not None:`) while the step sits outside that test and does not read the object: without the object nothing
clears. May be None: an attribute bound None in the class's `__init__` and elsewhere in the class only to None or to
a call's result (`self.scheduler = self.fetch_scheduler()`), not to a class built there (`WarmupLR(opt)`); a
parameter of the loop's function that defaults to None and is never bound again. Not followed: an attribute set from
`__init__`'s parameters, a name bound in the loop.
Also flagged, on the clearing: every clearing of the optimizer under a window test with a remainder other than 0
(`if i % k == 1: optimizer.zero_grad()`) while the step is under the same divisor's `== 0`: with `k` at 1 (no
accumulation) `i % 1` is always 0, so the step runs every iteration and the clearing never. Checked in loops and in
a function that back-propagates and steps outside any loop of its own (an ignite engine's update function, which
the engine runs once per iteration); not when `k` is an integer written out, a constant of the function, or a
command-line option whose default is larger than the remainder.

## Why it is wrong
`backward()` accumulates into `.grad`; it never overwrites. Without clearing, step *n* uses the sum of the
gradients of steps 1..n: the update grows every iteration, the loss oscillates or becomes nan. Nothing raises.

## Example
```python
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()                 # TL004
```

## Fix
Insert `optimizer.zero_grad()` right after the step (after `scaler.update()` when a GradScaler steps it), in the
same block. **Unsafe**: it changes the computed updates (to the intended ones).

## Correct look-alikes (not flagged)
zero_grad at the top or end of the loop, under the same accumulation guard as the step, under `i % k == 1 or k
== 1`, in a closure or helper, through a wrapper that holds the optimizer (`self.optim.zero_grad()` when the loop
steps `self.optim.optimizer`),
via `model.zero_grad()` or `set_to_none=True` (also when the optimizer's name is bound again in the file over
another model's parameters: a model.zero_grad() of any of them counts); `env.step(action)`, `scheduler.step()`,
`prof.step()`; the step of an optimizer written by hand in the file that reads no `.grad` (a class derived from
nothing outside the file: `SGDMomentum.step(grads)` over NumPy weights, an EMA of weights); DeepSpeed
engines (`engine.step()` zeroes gradients itself); an ignite process function that clears, or whose optimizer a
handler of the file clears; a per-step function handed to nothing (its caller may clear); a class named `Engine`
imported from anywhere but ignite. An optimizer attribute of `self` that `__init__` binds from a parameter it also hands
to the base class (`super().__init__(model, opt_d)`; `self.disc_opt = opt_d`), when the loop clears an attribute
the file never binds (`self.optimizer_d.zero_grad()`): the base may keep the same object under that name.

```python
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    scheduler.step()
```

`dist_autograd.backward(context_id, ...)` with `DistributedOptimizer.step(context_id)`: each context holds its
own gradients. A loop that writes the gradients by hand before the step (`target.grad = source.grad.clone()`, a
value that does not read the `.grad` it binds): each step applies what the loop wrote. `torch.autograd.grad(...)`:
it returns gradients and adds nothing to `.grad`.

A loop that cannot run (for every rule): a call before its backward that misses a required argument of what it
runs (`model(x, lengths)` where the model's `forward` needs `targets` too, the model built by a class of the
file or of another project file, directly or by a function there, through `.to(device)` and
`nn.DataParallel(...)`) raises TypeError there first. Followed: positional, keyword and keyword-only
parameters, defaults, `*args`, `**kwargs`, a class's own `__call__`. Not followed (the loop stays reported): a
decorated `forward`, a class with several bases or a base outside the project other than nn.Module's, a call
with `*args`/`**kwargs`, a model of unknown class.

## Limits
A helper the analysis cannot see (a library's, or one of another file when each file is checked alone) that is
handed the optimizer may clear it: such a loop is not reported. A function of another project file whose code
(and that of the functions of its file it calls) holds no event and writes no `.grad` (`utils.clip_gradient(opt,
5)`), and that calls nothing but its file's functions and plain builtins, is known to leave the gradients as they
are. A loop that calls a method of `self` the analysis cannot resolve while stepping `self.opt` is not reported,
unless that call is a context's factory (`with self.train_context():`) or an attribute named as a criterion or a
model (`self.loss_fn(pred, y)`, `self.net(x)`), which compute a value and clear nothing. A helper of another
file is followed one level deep: what it hands on to calls of its own file's imports is unknown.
"""

    def check(self, model: FileModel) -> Iterator[Finding]:
        engines = engine_iterations(model)  # an engine's process function: a whole iteration of the engine's loop
        yield from _cleared_off_window(model, engines)
        yield from _run_by_callers(model)
        for loop in [*model.loops, *engines]:
            # Gradients that land in `.grad` (not returned by autograd.grad, not kept in a dist_autograd context)
            steps = [s for s in loop.of(EventKind.STEP) if s.variant is not StepVia.DIST_CONTEXT]
            if not steps or not loop.backwards_into_grad():
                continue
            zero_grads = loop.of(EventKind.ZERO_GRAD)
            if _grads_set_by_hand(loop):
                continue  # `p.grad = g.clone()`: each step applies the gradients the loop writes, nothing adds up
            reported: set[str] = set()
            for step in steps:
                opt = step.target
                if opt is None or opt in reported or _cleared(model, loop, opt, step, zero_grads):
                    continue
                if loop.handed_to_unknown(opt):
                    continue  # a helper the analysis cannot see gets the optimizer: it may clear it
                if loop.node is None and _cleared_elsewhere(model, loop, opt):
                    continue  # an event handler of the engine (`ITERATION_STARTED`) may clear it
                if any(e.target == opt and e.rebinds for e in loop.of(EventKind.ASSIGN)):
                    continue  # a new optimizer every iteration (a one-off check, not a training loop)
                reported.add(opt)
                what = (f"`{code_of(step.node)}` steps `{opt}`{where(step)} in a loop" if step.origin is not None
                        else f"`{code_of(step.node)}` runs in a loop")
                clearing = [z for z in zero_grads if clears(model, opt, z)]
                optional = sorted(o for z in clearing if (o := optional_guard(model, loop, z, step)) is not None)
                never = ("only clears `{0}`'s gradients in its first pass" if any(
                            first_pass_only(loop, z, step) for z in clearing)
                         else f"only clears `{{0}}`'s gradients when `{optional[0]}` is set, which may be None"
                         if optional
                         else "only clears `{0}`'s gradients on an arm that a condition fixed for the whole loop "
                         "keeps apart from this step" if clearing
                         else "never clears `{0}`'s gradients").format(opt)
                yield Finding(
                    step.node,
                    f"{what} that {never}: backward() adds "
                    f"into .grad, so each step applies the sum of all earlier gradients; call `{opt}.zero_grad()`",
                    _fix(loop, step, opt),
                )


def _run_by_callers(model: FileModel) -> Iterator[Finding]:
    """A training-step method that steps an optimizer no clearing of the method precedes, run once per iteration
    by a loop of another project file that clears nothing either (`engines.run_by_callers`): reported on the
    method's first backward before the step, where the fix belongs (the method is the iteration)."""
    if model.project is None:
        return
    for body in model.step_bodies():
        scope = body.scope
        if scope.class_name is None or not body.backwards_into_grad():
            continue
        zero_grads = body.of(EventKind.ZERO_GRAD)
        for step in body.of(EventKind.STEP):
            opt = step.target
            if opt is None or not opt.startswith("self.") or step.variant is StepVia.DIST_CONTEXT \
                    or step.scope is not scope.node \
                    or _cleared(model, body, opt, step, zero_grads) or body.handed_to_unknown(opt) \
                    or _cleared_elsewhere(model, body, opt):
                continue
            before = sorted((b for b in scope.own_backwards() if b.into_grad() and body.may_follow(b, step)),
                            key=lambda b: b.seq)
            use = next((u for u in run_by_callers(model, scope) if not u.clears), None) if before else None
            if use is None:
                continue
            yield Finding(
                before[0].node,
                f"`{code_of(before[0].node)}` adds into the gradients `{code_of(step.node)}` applies, and nothing "
                f"clears `{opt}`'s gradients in `{scope.class_name}.{scope.name}()`, which {use.path}:{use.line} runs "
                f"once per iteration of a loop that does not clear them either: backward() adds into .grad, so each "
                f"step applies the sum of all earlier gradients; call `{opt}.zero_grad()` before this backward",
            )
            break


def _cleared_off_window(model: FileModel, engines: list[Loop]) -> Iterator[Finding]:
    """Every clearing of a stepped optimizer sits under a window test with a remainder other than 0 (`if i % k ==
    1: opt.zero_grad()`) and the step under the same divisor's `== 0`: when `k` is 1 (no accumulation) `i % 1` is
    always 0, so the step runs every iteration and the clearing never. Also in a function that steps outside any
    loop of its own (an ignite engine's update function runs once per iteration). Not when `k` is a constant, or a
    command-line option whose default, larger than the remainder."""
    if not REMAINDER_TEST.search(model.text):
        return
    seen: set[int] = set()
    for loop in [*model.loops, *model.step_bodies(), *engines]:
        if not loop.backwards_into_grad():
            continue
        zero_grads = loop.of(EventKind.ZERO_GRAD)
        for step in loop.of(EventKind.STEP):
            opt = step.target
            mine = [z for z in zero_grads if opt is not None and clears(model, opt, z)]
            windows = [_window(loop, z) for z in mine]
            if not mine or any(w is None or w[1] == 0 for w in windows) or id(mine[0].node) in seen:
                continue
            divisor, remainder, test = windows[0]  # type: ignore[misc]  # none is None (above)
            stepped = _window(loop, step)
            if stepped is None or stepped[1] != 0 or code_of(stepped[0]) != code_of(divisor):
                continue
            if (_known_int(model, loop, divisor) or 1) > remainder:
                continue
            seen.add(id(mine[0].node))
            k = code_of(divisor)
            yield Finding(
                mine[0].node,
                f"`{code_of(mine[0].node)}` runs only when `{code_of(test)}`, which never holds when `{k}` is 1 (no "
                f"accumulation: `x % 1` is always 0), while `{code_of(step.node)}` then runs every iteration: "
                f"`{opt}`'s gradients are never cleared and each step applies the sum of all earlier gradients; also "
                f"clear when `{k} == 1`, or clear right after the step",
            )


def _window(loop: Loop, e: Event) -> tuple[cst.BaseExpression, int, cst.BaseExpression] | None:
    """The window test `e` runs under (`i % k == r`): its divisor, remainder and test."""
    within = e.guards_within(loop.node) if loop.node is not None else e.guards
    for g in within:
        test = loop.scope.test_of(g, e)
        found = modulo_test(test) if not g.negated and test is not None else None
        if found is not None:
            return found[0], found[1], test  # type: ignore[return-value]  # test is an expression here
    return None


def _known_int(model: FileModel, loop: Loop, expr: cst.BaseExpression) -> int | None:
    """An integer `expr` holds: written out, a constant of the function, or a command-line option's default."""
    if type(expr) is cst.Integer:
        return int(expr.evaluated_value)
    if type(expr) is cst.Name and loop.events:
        defs, entry = loop.scope.reaching(expr.value, loop.events[0])
        values = {int(d.value.evaluated_value) for d in defs if type(d.value) is cst.Integer}
        if defs and not entry and len(values) == 1 and len(defs) == len([d for d in defs if type(d.value) is cst.Integer]):
            return values.pop()
    default = model.options.default(expr)
    return int(default.evaluated_value) if type(default) is cst.Integer else None


def _grads_set_by_hand(loop: Loop) -> bool:
    """The loop binds a `.grad` to a value that does not read it (`target.grad = source.grad.clone()`)."""
    return any(e.kind is EventKind.ASSIGN and e.variant is AssignForm.PLAIN and (e.target or "").endswith(".grad")
               and e.value is not None and e.target not in names_in(e.value) for e in loop.events)


def _cleared_elsewhere(model: FileModel, loop: Loop, opt: str) -> bool:
    """Another function of the file clears `opt`'s gradients (a handler the engine runs around the iteration)."""
    return any(scope is not loop.scope and any(e.kind is EventKind.ZERO_GRAD and clears(model, opt, e) for e in scope.events)
               for scope in model.scopes)


def _cleared(model: FileModel, loop: Loop, opt: str, step: Event, zero_grads: list[Event]) -> bool:
    return any(clears(model, opt, z) and reaches_step(loop, z, step) and optional_guard(model, loop, z, step) is None
               for z in zero_grads)


def _fix(loop: Loop, step: Event, opt: str) -> Fix | None:
    anchor = loop.after_step(step)
    if type(anchor.stmt) is not cst.SimpleStatementLine:
        return None
    return Fix("unsafe", f"insert `{opt}.zero_grad()` after the step", (insert_after(anchor.stmt, f"{opt}.zero_grad()\n"),))
