"""What a name may hold, read from the definitions the file model knows: the optimizer a step steps (its
constructor calls), the values a name is bound to, and how many times a loop runs. Queries over `FileModel`, for
the rules."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.events import AssignForm, Event, EventKind
from torchlint.analysis.exprs import argument_for, dotted, keyword, names_in, positional_params
from torchlint.source.walk import walk
from torchlint.analysis.loops import Loop, optimizers_loops
from torchlint.analysis.model import FileModel
from torchlint.analysis.names import Role, family_named, role_of_value
from torchlint.analysis.scopes import Scope
from torchlint.analysis.semantics import (
    BATCH_NAME, BOUNDED_CONTAINERS, CLIP_FUNCTIONS, DECOUPLED_DECAY_OPTIMIZERS, SETTINGS_HOLDERS,
)


def optimizer_calls(model: FileModel, scope: Scope | None, name: str | None, depth: int = 2,
                    at: Event | None = None) -> list[cst.Call] | None:
    """The constructor calls that built the optimizer `name` of `scope` may hold: those the definitions reaching
    `at` bind (`_bound_optimizers`), else one built in the file under that name, or, for a parameter of the
    function, what every call of the function in this file passes for it (`train_epoch(model, data, s2s_opt)`),
    or what a function of the file returns when the name is bound to its call (`optimizer = make_optimizer(m)`,
    Lightning's `opt = self.optimizers()` from `configure_optimizers`). None when one of them is unknown."""
    if name is None or depth < 0:
        return None
    if scope is not None and at is not None and at.scope is scope.node:
        defs, entry = scope.reaching(name, at)
        if defs and not entry:
            return _bound_optimizers(model, scope, defs, depth)
    built = model.symbols.optimizer_class.get(name) or model.symbols.optimizer_class.get(name.rsplit(".", 1)[-1])
    if built is not None and dotted(built.func) != "self.optimizers":
        return [built]
    returned = [_returned(model, s, a.value, depth) for s in model.scopes for a in s.assignments(name)]
    if returned and None not in returned:
        return [c for calls in returned for c in calls or ()]
    params = positional_params(scope.node) if scope is not None else []
    if scope is None or depth == 0 or name.partition(".")[0] not in params:
        return None
    return _through_callers(model, scope, name, lambda caller, named: optimizer_calls(model, caller, named, depth - 1))


def bound_values(model: FileModel, scope: Scope, name: str | None, depth: int = 2) -> list[cst.BaseExpression] | None:
    """Every value `name` of `scope` may be bound to: its plain assignments in the function (for `self.x`, in
    any method of the class; for a global, in the module body), or, for a parameter, what every call of the
    function in this file passes for it (two levels). None when one is not known (no binding seen, an
    argument that is not a name)."""
    if name is None or name.count(".") > name.startswith("self."):
        return None
    owners = [s for s in model.scopes if s.class_name == scope.class_name] if name.startswith("self.") else [scope]
    for base in _file_bases(model, scope.class_name) if name.startswith("self.") else ():
        if any(s.assignments(name) for s in owners):
            break
        owners = [s for s in model.scopes if s.class_name == base]  # bound by a base class of the file
    params = positional_params(scope.node)
    if not any(s.assignments(name) for s in owners) and name not in params and "." not in name:
        owners = [model.scopes[0]]  # a global of the module
    binds = [a for s in owners for a in s.assignments(name) if a.scope is s.node]
    if binds or name not in params or depth == 0:
        known = binds and all(a.variant is AssignForm.PLAIN and a.value is not None for a in binds)
        return [a.value for a in binds] if known else None  # type: ignore[misc]  # no None (known)
    return _through_callers(model, scope, name, lambda caller, named: bound_values(model, caller, named, depth - 1))


def _file_bases(model: FileModel, cls: str | None) -> list[str]:
    """The classes of the file `cls` derives from, nearest first (`class SACRNN(SAC)`: [SAC])."""
    out: list[str] = []
    while cls is not None and cls in model.classes and len(out) < 4:
        bases = [b for b in (dotted(x.value) for x in model.classes[cls].bases) if b in model.classes and b not in out]
        cls = bases[0] if bases else None
        out += bases[:1]
    return out


def bounded(model: FileModel, scope: Scope, name: str | None) -> bool:
    """Every value `name` is bound to (in the function; for `self.x`, in any method of the class) is a container
    that keeps at most a bound of items, given when built (`collections.deque(maxlen=100)`): what is appended past
    it drops the oldest."""
    if name is None or name.count(".") > name.startswith("self."):
        return False
    owners = [s for s in model.scopes if s.class_name == scope.class_name] if name.startswith("self.") else [scope]
    binds = [a for s in owners for a in s.assignments(name) if a.scope is s.node and a.rebinds]
    return bool(binds) and all(a.variant is AssignForm.PLAIN and a.value is not None and _bound_given(a.value)
                               for a in binds)


def _bound_given(value: cst.BaseExpression) -> bool:
    func = dotted(value.func) if type(value) is cst.Call else None
    bound = BOUNDED_CONTAINERS.get(func.rsplit(".", 1)[-1]) if func is not None else None
    if bound is None:
        return False
    args = value.args  # type: ignore[attr-defined]  # a Call (func above)
    given = [a.value for a in args if a.keyword is not None and a.keyword.value == bound[0]]
    positional = [a.value for a in args if a.keyword is None and not a.star]
    given += positional[bound[1]:bound[1] + 1]
    return bool(given) and not (type(given[0]) is cst.Name and given[0].value == "None")


def _through_callers(model: FileModel, scope: Scope, name: str, ask) -> list | None:
    """What `ask(caller, the caller's name for name)` answers for every call of `scope`'s function in the file,
    joined; None when one answer is not known, or there is no call."""
    out: list = []
    for caller, named in model.callers_naming(scope, name):
        got = ask(caller, named)
        if got is None:
            return None
        out.extend(got)
    return out or None


def _bound_optimizers(model: FileModel, scope: Scope, defs: tuple[Event, ...], depth: int) -> list[cst.Call] | None:
    """What the definitions of an optimizer's name reaching its step bind: a constructor (of torch, or of a
    class named by its family), what a function of the file returns, or the optimizer a call takes and hands
    back under the same name (`optimizer = Wrapper(optimizer, model)`, `model, opt = amp.initialize(model,
    opt)`); `None` binds nothing. None when one of them is unknown."""
    found: list[cst.Call] = []
    for d in defs:
        v = d.value
        if type(v) is cst.Name and v.value == "None":
            continue
        if d.kind is not EventKind.ASSIGN or type(v) is not cst.Call:
            return None
        if role_of_value(v) is Role.OPTIMIZER and dotted(v.func) != "self.optimizers" or family_named(v):
            found.append(v)
            continue
        taken = any(dotted(a.value) == d.target for a in v.args)
        calls = (optimizer_calls(model, scope, d.target, depth - 1, d) if taken
                 else _returned(model, scope, v, depth))
        if calls is None:
            return None
        found.extend(calls)
    return found or None


def _returned(model: FileModel, scope: Scope, value: cst.BaseExpression | None, depth: int) -> list[cst.Call] | None:
    """The optimizers a function of the file returns, `value` being its call, when each return is one known."""
    callee = dotted(value.func) if type(value) is cst.Call else None
    if callee == "self.optimizers":  # Lightning's: what the module's configure_optimizers returns
        callee = "self.configure_optimizers"
    helper = model.resolve(scope, callee) if callee is not None and depth > 0 else None
    if helper is None:
        return None
    found: list[cst.Call] = []
    for r in helper.raw:
        if r.kind is not EventKind.RETURN or r.scope is not helper.node:
            continue
        if type(r.value) is cst.Call and role_of_value(r.value) is Role.OPTIMIZER:
            found.append(r.value)
            continue
        calls = optimizer_calls(model, helper, dotted(r.value) if r.value is not None else None, depth - 1, r)
        if calls is None:
            return None
        found.extend(calls)
    return found or None


def trip_count(model: FileModel, loop: Loop) -> int | None:
    """How many times a `for ... in range(...)` loop runs when that is known: `Loop.trip_count`'s constants, or a
    bound that is a command-line option left at its default (`range(args.gradient_steps)`)."""
    trips = loop.trip_count()
    node = loop.node
    if trips is not None or type(node) is not cst.For or type(node.iter) is not cst.Call:
        return trips
    args = node.iter.args
    if dotted(node.iter.func) != "range" or len(args) != 1 or args[0].keyword or args[0].star or not loop.events:
        return None
    holder = (dotted(args[0].value) or "").split(".", 1)[0]
    defs, entry = loop.scope.reaching(holder, loop.events[0])
    if defs or not entry or holder in loop.scope.params:
        return None  # `args` bound or passed in the function: not (only) the module's parsed options
    default = model.options.default(args[0].value)
    return max(0, int(default.evaluated_value)) if type(default) is cst.Integer else None


def runs_while_kept(model: FileModel, scope: Scope, e: Event) -> int | None:
    """How many times `e` adds to its container before the container is bound afresh: the product of the trip
    counts of the loops it is carried across, when each is a constant of the file (a loop over the optimizers it
    steps, for a container the function binds afresh, counts once); None when one is not (TL007: a test's
    mini-run keeps a bounded handful of graphs)."""
    count = 1
    for node in e.loops:
        loop = next((lp for lp in model.loops if lp.node is node and lp.scope is scope), None)
        resets = [a for a in scope.assignments(e.target or "") if a.rebinds and node in a.loops and a.node is not e.node
                  and not a.seeds]
        if resets and not (loop is not None and all(loop.periodic(a) for a in resets)):
            continue  # bound afresh in each iteration of this loop (not only every k-th): they do not add up
        if loop is not None and any(f is node for f in optimizers_loops(loop.of(EventKind.STEP))) and any(
                a.rebinds and node not in a.loops and a.scope is scope.node for a in scope.assignments(e.target or "")):
            continue  # bound in the function, filled once per optimizer it steps (`for net, opt in zip(nets, opts)`)
        trips = _bounded_trip_count(model, scope, loop) if loop is not None else None
        if trips is None:
            return None
        count *= trips
    return count


def _bounded_trip_count(model: FileModel, scope: Scope, loop: Loop) -> int | None:
    """`Loop.trip_count`, and also a bound that comes from outside the function: a parameter's default and the
    constants its callers in the file pass (`def run(steps=20)`), or a constant of the module (`STEPS = 20`)."""
    trips = loop.trip_count()
    node = loop.node
    if trips is not None or type(node) is not cst.For or type(node.iter) is not cst.Call:
        return trips
    if dotted(node.iter.func) != "range" or not loop.events:
        return None
    args = [a.value for a in node.iter.args if a.keyword is None and not a.star]
    if len(args) not in (1, 2) or len(args) != len(node.iter.args):
        return None
    bounds = [_outside_constant(model, scope, a, loop.events[0]) for a in args]
    if any(b is None for b in bounds):
        return None
    return max(0, bounds[-1] - (bounds[0] if len(bounds) == 2 else 0))  # type: ignore[operator]  # no None (above)


def _outside_constant(model: FileModel, scope: Scope, expr: cst.BaseExpression, at: Event) -> int | None:
    """The largest value `expr` can have when it is an integer literal, or a name defined nowhere in the function
    that is a module constant or a parameter whose default and every argument the file passes for it are."""
    if type(expr) is cst.Integer:
        return int(expr.evaluated_value)
    if type(expr) is not cst.Name:
        return None
    name = expr.value
    defs, entry = scope.reaching(name, at)
    if defs or not entry:
        return None  # assigned in the function: Loop.trip_count has read what it can
    param = scope.params.get(name)
    if param is None:
        return module_constant(model, name)
    values = [] if param.default is None else [_literal_or_constant(model, param.default)]
    given = _passed_for(model, scope, name)
    if given is None:
        return None
    values += [_literal_or_constant(model, v) for v in given]
    if not values or any(v is None for v in values):
        return None
    return max(values)  # type: ignore[type-var]  # no None (above)


def _literal_or_constant(model: FileModel, expr: cst.BaseExpression) -> int | None:
    if type(expr) is cst.Integer:
        return int(expr.evaluated_value)
    return module_constant(model, expr.value) if type(expr) is cst.Name else None


def module_constant(model: FileModel, name: str) -> int | None:
    """`STEPS = 20` at module level, never bound to anything else there."""
    module = model.scopes[0]
    defs = module.assignments(name)
    if not defs or not all(d.variant is AssignForm.PLAIN and type(d.value) is cst.Integer for d in defs):
        return None
    values = {int(d.value.evaluated_value) for d in defs}  # type: ignore[union-attr]  # Integers (above)
    return values.pop() if len(values) == 1 else None


def _passed_for(model: FileModel, callee: Scope, param: str) -> list[cst.BaseExpression] | None:
    """What the calls of the function in this file pass for `param` (nothing for a call that leaves the default);
    None when a call passes `*args` / `**kwargs`, so that what it passes is not known."""
    positional = positional_params(callee.node)
    out: list[cst.BaseExpression] = []
    for caller in model.scopes:
        for call in walk(caller.node):
            if type(call) is not cst.Call or (func := dotted(call.func)) is None:
                continue
            if model.resolve(caller, func) is not callee:
                continue
            if any(a.star for a in call.args):
                return None
            passed = argument_for(call, positional[1:] if func.startswith("self.") else positional, param)
            if passed is not None:
                out.append(passed)
    return out


def configuration_test(model: FileModel, scope: Scope, test: cst.BaseExpression) -> bool:
    """`test` reads only configuration, the same on every call of the function: attributes of an object `self` holds
    (`self.args.enable_lr_schedule`) that no method but `__init__` binds, or names the module binds and no function
    rebinds; no call, no parameter (`epoch > 0` changes from one call to the next), no name the function binds."""
    if any(type(n) is cst.Call for n in walk(test)):
        return False
    names = names_in(test)
    for name in (n for n in names if not any(m.startswith(n + ".") for m in names)):  # the whole chains
        root = name.split(".", 1)[0]
        if root == "self":
            parts = name.split(".")
            if len(parts) < 3:
                return False  # `self.epoch`: the object's own state
            held = ".".join(parts[:2])
            if any(s.name != "__init__" and (s.assignments(held) or s.assignments(name)) for s in model.scopes
                   if s.class_name == scope.class_name):
                return False
        elif root in scope.params or scope.assignments(root) or not model.scopes[0].assignments(root) or any(
                s.assignments(root) for s in model.scopes[1:]):
            return False
    return True


def step_clips(model: FileModel | None, lineage: list[str]) -> bool:
    """The first `step` method along `lineage` (a class, then its bases of the same file) calls a clipping function
    (`clip_grad_norm_`, `clip_grad_value_`): an optimizer whose update sees the gradient's size."""
    for owner in lineage if model is not None else ():
        scope = next((s for s in model.scopes  # type: ignore[union-attr]  # (not None: tested above)
                      if s.class_name == owner and s.name == "step"), None)
        if scope is not None:
            return any(type(n) is cst.Call and (dotted(n.func) or "").rpartition(".")[2] in CLIP_FUNCTIONS
                       for n in walk(scope.node))
    return False


def steps_clipping(model: FileModel, call: cst.Call) -> bool:
    """The optimizer `call` builds is of a class of the file, or of another project file, whose `step()` clips."""
    name = dotted(call.func)
    if name is None:
        return False
    if name in model.classes:
        return step_clips(model, [name])
    return model.project is not None and model.project.steps_clipping(name)


def coupled_decay(model: FileModel, call: cst.Call, name: str) -> bool:
    """An L2 `weight_decay` added to the gradient (Adam's, not AdamW's) not known to be zero: written as zero, an
    option whose default is zero, or a name every assignment of which in the file is zero (`args.weight_decay =
    0.0` in the defaults it is built from). It sees the gradient's size."""
    decay = keyword(call, "weight_decay")
    if decay is None or name in DECOUPLED_DECAY_OPTIMIZERS:
        return False
    value = model.options.default(decay.value) or decay.value
    target = dotted(value)
    values = [a.value for sc in model.scopes for a in sc.assignments(target)] if target and type(value) is not cst.Name else [value]
    return not values or not all(_zero(v) for v in values)


def _zero(value: cst.BaseExpression | None) -> bool:
    return (type(value) is cst.Integer or type(value) is cst.Float) and float(value.value) == 0


def lr_divided(model: FileModel, call: cst.Call, k: cst.BaseExpression) -> bool:
    """The optimizer's learning rate is divided by the window `k` or by the batch (`lr=cfg.learning_rate /
    cfg.batch`): the convention of a loss summed over the batch, whose micro-batch gradients are meant to add up."""
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    lr = keyword(call, "lr")
    value = lr.value if lr is not None else positional[1] if len(positional) > 1 else None
    if type(value) is cst.Name:  # `lr = base_lr / batch_size` bound once in the file
        bound = [a.value for scope in model.scopes for a in scope.assignments(value.value) if a.value is not None]
        value = bound[0] if len(bound) == 1 else None
    if type(value) is not cst.BinaryOperation or type(value.operator) is not cst.Divide:
        return False
    divisor = value.right
    window = names_in(k) - SETTINGS_HOLDERS
    return bool(names_in(divisor) & window) or any(BATCH_NAME.search(n) for n in names_in(divisor))
