"""Method calls classified: `x.backward()`, `opt.step()`, `scaler.step(opt)`, `sched.step()`, `xs.append(v)`,
`h.detach_()` ... become BACKWARD, STEP, SCHED_STEP, APPEND, RESET events according to what the receiver holds
(`names.Symbols`)."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.events import Event, EventKind
from torchlint.analysis.exprs import container_name, dotted, is_true, keyword, positional
from torchlint.analysis.names import Kind, Symbols
from torchlint.analysis.semantics import IN_PLACE_DETACH


def classify(e: Event, symbols: Symbols) -> Event | None:
    """What a METHOD event is (a backward, step, zero_grad, append, reset ...) given what its names hold, or None."""
    call = e.node
    assert type(call) is cst.Call and type(call.func) is cst.Attribute
    method = call.func.attr.value
    recv = call.func.value
    recv_name = dotted(recv)
    kind = symbols.kind(recv_name)
    if method in ("backward", "manual_backward", "grad"):
        return _backward(e, call, method, recv, recv_name, kind, symbols)
    if method == "step":
        if kind is Kind.SCALER:
            arg = positional(call, 0)
            opt = dotted(arg.value) if arg else None
            return e.but(kind=EventKind.STEP, target=opt, via=recv_name) if opt else None
        if kind is Kind.OPTIMIZER:
            # `DistributedOptimizer.step(context_id)` reads the gradients of a dist_autograd context.
            flavor = "context" if "dist_autograd" in e.contexts and call.args else ""
            return e.but(kind=EventKind.STEP, target=recv_name, flavor=flavor)
        if kind is Kind.SCHEDULER:
            return e.but(kind=EventKind.SCHED_STEP, target=recv_name)
        return None
    if method == "zero_grad":
        flavor = "optimizer" if kind is Kind.OPTIMIZER else "model"
        return e.but(kind=EventKind.ZERO_GRAD, target=recv_name, flavor=flavor)
    if method == "update" and kind is Kind.SCALER:
        return e.but(kind=EventKind.SCALER_UPDATE, target=recv_name)
    if method == "unscale_" and kind is Kind.SCALER:
        arg = positional(call, 0)
        return e.but(kind=EventKind.SCALER_UNSCALE, target=dotted(arg.value) if arg else None, via=recv_name)
    if method in ("clip_grad_norm_", "clip_grad_value_"):
        flavor = "accelerator" if kind is Kind.ACCELERATOR else "torch"
        return e.but(kind=EventKind.CLIP, flavor=flavor)
    if recv_name is None:
        container = container_name(recv)
        if method in IN_PLACE_DETACH and container is not None:
            # `hidden[0].detach_()`: the state's tensors are cut from their graph in place
            return e.but(kind=EventKind.RESET, target=container, flavor="item")
        return None
    if method in ("append", "extend") and call.args:
        return e.but(kind=EventKind.APPEND, target=recv_name, value=call.args[-1].value)
    if method == "clear":
        return e.but(kind=EventKind.RESET, target=recv_name)
    if method in IN_PLACE_DETACH:
        return e.but(kind=EventKind.RESET, target=recv_name)
    if method in ("zero_", "fill_"):
        if recv_name.endswith(".grad") or recv_name.endswith(".grad.data"):
            return e.but(kind=EventKind.ZERO_GRAD, target=recv_name, flavor="param")
        if recv_name.endswith(".data"):
            return e.but(kind=EventKind.FAKE_RESET, target=recv_name[: -len(".data")])
    return None


def _backward(
    e: Event, call: cst.Call, method: str, recv: cst.BaseExpression, recv_name: str | None, kind: Kind,
    symbols: Symbols,
) -> Event | None:
    retain = keyword(call, "retain_graph")
    create = keyword(call, "create_graph")
    arg0 = positional(call, 0)
    via = None
    if method == "grad":
        if recv_name not in ("torch.autograd", "autograd"):
            return None
        flavor, value = "grad", arg0.value if arg0 else None
    elif method == "manual_backward":
        flavor, value = "lightning", arg0.value if arg0 else None
    elif recv_name in ("torch.autograd", "autograd"):
        flavor, value = "autograd", arg0.value if arg0 else None
    elif recv_name is not None and recv_name.endswith("autograd"):
        # `dist_autograd.backward(context_id, roots, retain_graph=...)`: the roots come last, and the
        # gradients go to the context, not to `.grad`.
        last = positional(call, len([a for a in call.args if a.keyword is None]) - 1)
        flavor, value = "dist", last.value if last else None
    elif kind is Kind.ACCELERATOR:
        flavor, value = "accelerator", arg0.value if arg0 else None
    elif kind is Kind.ENGINE:
        flavor, value = "engine", arg0.value if arg0 else None
    elif kind is Kind.OPTIMIZER and arg0 is not None:
        # `optimizer.backward(loss)`: apex FP16_Optimizer, DeepSpeed and ColossalAI wrappers scale the loss
        # and back-propagate it into `.grad`, like `loss.backward()`
        flavor, value = "optimizer", arg0.value
    elif (
        type(recv) is cst.Call
        and type(recv.func) is cst.Attribute
        and recv.func.attr.value == "scale"
        and symbols.is_(dotted(recv.func.value), Kind.SCALER)
        and recv.args
    ):
        flavor, value, via = "scaler", recv.args[0].value, dotted(recv.func.value)
    else:
        flavor, value = "tensor", recv
        if retain is None:
            pos = positional(call, 1)
            retain = pos if pos is not None else None
    if value is None:
        return None
    return e.but(
        kind=EventKind.BACKWARD,
        value=value,
        flavor=flavor,
        via=via,
        retain_arg=retain if retain is not None and is_true(retain.value) else None,
        create_graph=create is not None and is_true(create.value),
    )
