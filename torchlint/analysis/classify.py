"""Method calls classified: `x.backward()`, `opt.step()`, `scaler.step(opt)`, `sched.step()`, `xs.append(v)`,
`h.detach_()` ... become BACKWARD, STEP, SCHED_STEP, APPEND, RESET events according to what the receiver holds
(`names.Symbols`)."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.events import BackwardVia, ClipVia, Event, EventKind, ResetOf, StepVia, ZeroGradOf
from torchlint.analysis.exprs import container_name, dotted, is_true, keyword, positional
from torchlint.analysis.names import Role, Symbols
from torchlint.analysis.semantics import CLIP_FUNCTIONS, IN_PLACE_DETACH, STEPPING_FUNCTIONS, is_loss_name


def classify(e: Event, symbols: Symbols) -> Event | None:
    """What a METHOD event is (a backward, step, zero_grad, append, reset ...) given what its names hold, or None."""
    call = e.node
    if e.callee in STEPPING_FUNCTIONS:  # `xm.optimizer_step(optimizer)` steps its argument (the walker resolved it)
        assert type(call) is cst.Call
        arg = positional(call, 0) or keyword(call, "optimizer")
        opt = dotted(arg.value) if arg else None
        return e.but(kind=EventKind.STEP, target=opt, callee=None) if opt else None
    assert type(call) is cst.Call and type(call.func) is cst.Attribute
    method = call.func.attr.value
    recv = call.func.value
    recv_name = dotted(recv)
    role = symbols.role(recv_name)
    if method in ("backward", "manual_backward", "grad"):
        return _backward(e, call, method, recv, recv_name, role, symbols)
    if method == "step":
        if role is Role.SCALER:
            arg = positional(call, 0)
            opt = dotted(arg.value) if arg else None
            return e.but(kind=EventKind.STEP, target=opt, via=recv_name) if opt else None
        if role is Role.OPTIMIZER:
            # `DistributedOptimizer.step(context_id)` reads the gradients of a dist_autograd context.
            variant = StepVia.DIST_CONTEXT if "dist_autograd" in e.contexts and call.args else None
            return e.but(kind=EventKind.STEP, target=recv_name, variant=variant)
        if role is Role.SCHEDULER:
            return e.but(kind=EventKind.SCHED_STEP, target=recv_name)
        return None
    if method == "zero_grad":
        of = ZeroGradOf.OPTIMIZER if role is Role.OPTIMIZER else ZeroGradOf.MODEL
        return e.but(kind=EventKind.ZERO_GRAD, target=recv_name, variant=of)
    if method == "update" and role is Role.SCALER:
        return e.but(kind=EventKind.SCALER_UPDATE, target=recv_name)
    if method == "unscale_" and role is Role.SCALER:
        arg = positional(call, 0)
        return e.but(kind=EventKind.SCALER_UNSCALE, target=dotted(arg.value) if arg else None, via=recv_name)
    if method in CLIP_FUNCTIONS:
        clip = ClipVia.ACCELERATOR if role is Role.ACCELERATOR else ClipVia.TORCH
        return e.but(kind=EventKind.CLIP, variant=clip)
    if method == "clamp_" and (recv_name or "").removesuffix(".data").endswith(".grad"):
        # `p.grad.data.clamp_(-c, c)`: clipping by hand, each gradient to a range
        return e.but(kind=EventKind.CLIP, variant=ClipVia.BY_HAND)
    if recv_name is None:
        container = container_name(recv)
        if method in IN_PLACE_DETACH and container is not None:
            # `hidden[0].detach_()`: the state's tensors are cut from their graph in place
            return e.but(kind=EventKind.RESET, target=container, variant=ResetOf.ITEMS)
        if method in ("append", "extend") and call.args:
            # `hist[k].append(v)`, `hist.setdefault(k, []).append(v)`: the list is an entry of `hist`, which keeps it
            if type(recv) is cst.Call and type(recv.func) is cst.Attribute and recv.func.attr.value == "setdefault":
                container = dotted(recv.func.value)
            elif type(recv) is not cst.Subscript:
                container = None
            if container is not None:
                return e.but(kind=EventKind.APPEND, target=container, value=call.args[-1].value)
        return None
    if method in ("append", "extend") and call.args:
        return e.but(kind=EventKind.APPEND, target=recv_name, value=call.args[-1].value)
    if method == "clear":
        return e.but(kind=EventKind.RESET, target=recv_name)
    if method in IN_PLACE_DETACH:
        return e.but(kind=EventKind.RESET, target=recv_name)
    if method in ("zero_", "fill_"):
        if recv_name.endswith(".grad") or recv_name.endswith(".grad.data"):
            return e.but(kind=EventKind.ZERO_GRAD, target=recv_name, variant=ZeroGradOf.PARAM)
        if recv_name.endswith(".data"):
            return e.but(kind=EventKind.FAKE_RESET, target=recv_name[: -len(".data")])
    return None


def _backward(
    e: Event, call: cst.Call, method: str, recv: cst.BaseExpression, recv_name: str | None, role: Role,
    symbols: Symbols,
) -> Event | None:
    retain = keyword(call, "retain_graph")
    create = keyword(call, "create_graph")
    arg0 = positional(call, 0)
    via = None
    if method == "grad":
        if recv_name not in ("torch.autograd", "autograd"):
            return None
        how, value = BackwardVia.AUTOGRAD_GRAD, arg0.value if arg0 else None
    elif method == "manual_backward":
        how, value = BackwardVia.LIGHTNING, arg0.value if arg0 else None
    elif recv_name in ("torch.autograd", "autograd"):
        how, value = BackwardVia.AUTOGRAD, arg0.value if arg0 else None
    elif recv_name is not None and recv_name.endswith("autograd"):
        # `dist_autograd.backward(context_id, roots, retain_graph=...)`: the roots come last, and the
        # gradients go to the context, not to `.grad`.
        last = positional(call, len([a for a in call.args if a.keyword is None]) - 1)
        how, value = BackwardVia.DIST, last.value if last else None
    elif role is Role.ACCELERATOR:
        how, value = BackwardVia.ACCELERATOR, arg0.value if arg0 else None
    elif role is Role.ENGINE:
        how, value = BackwardVia.ENGINE, arg0.value if arg0 else None
    elif role is Role.OPTIMIZER and arg0 is not None:
        # `optimizer.backward(loss)`: apex FP16_Optimizer, DeepSpeed and ColossalAI wrappers scale the loss
        # and back-propagate it into `.grad`, like `loss.backward()`
        how, value = BackwardVia.OPTIMIZER, arg0.value
    elif (
        type(recv) is cst.Call
        and type(recv.func) is cst.Attribute
        and recv.func.attr.value == "scale"
        and symbols.is_(dotted(recv.func.value), Role.SCALER)
        and recv.args
    ):
        how, value, via = BackwardVia.SCALER, recv.args[0].value, dotted(recv.func.value)
    elif (scaled := symbols.scaled_loss(recv_name)) is not None:
        via, value = scaled  # `scaled = scaler.scale(loss)`, then `scaled.backward()`
        how = BackwardVia.SCALER
    elif type(recv) is cst.Name and recv.value != "self" and not is_loss_name(recv.value) and arg0 is not None \
            and type(arg0.value) is cst.Name and is_loss_name(arg0.value.value):
        # `method.backward(loss)`: an object that back-propagates the loss it is handed (a trainer, a plugin
        # composer), not a tensor handed its gradient (`out.backward(grad)`); what it does besides (scaling,
        # stepping) is not known, as of an engine's
        how, value = BackwardVia.ENGINE, arg0.value
    else:
        how, value = BackwardVia.TENSOR, recv
        if retain is None:
            pos = positional(call, 1)
            retain = pos if pos is not None else None
    if value is None:
        return None
    return e.but(
        kind=EventKind.BACKWARD,
        value=value,
        variant=how,
        via=via,
        retain_arg=retain if retain is not None and is_true(retain.value) else None,
        create_graph=create is not None and is_true(create.value),
    )
