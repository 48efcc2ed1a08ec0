"""The runtime monitor behind `torchlint run`: the user's script, unchanged, with hooks that watch its training.

    python -m torchlint.verify.monitor --steps N --out OUT.json [--device cpu|cuda] SCRIPT [ARGS...]

The script runs as `python SCRIPT ARGS` would run it: the same `sys.argv`, the current directory, `__main__`, its
folder first on `sys.path`. After N optimizer steps the monitor stops it from the step hook (a BaseException the
script does not catch). What it watches, and what it records (the sign, named in torchlint.verify.signs, and the
script's own frames, innermost last, from the stack when the hook fired; each rule says which signs are its own):

- every optimizer step (PyTorch's global step pre/post hooks), every backward (`torch.autograd.backward`, which
  `Tensor.backward` calls), every `zero_grad()` of an optimizer or a module;
- the gradient each backward brings to each parameter (a tensor hook), summed since the last step: at a step,
  `.grad` minus that sum is what was there before, a gradient from before the previous step never cleared;
  backwards since the last step but every gradient gone; a first step with no backward before it;
- a number or tensor taken out of a graph-carrying tensor at the script's line (`.item()`, `.detach()`,
  `.tolist()`, `float()`, `.data`) that no backward of its window then reaches: a hook on the tensor never fires,
  so the term it came from brought no gradient;
- k backwards from one line between two steps, none keeping its graph for the next (micro-batches, not the
  heads of one forward), each of a loss neither divided nor multiplied (its last op, under a GradScaler's
  scale), the gradients at the step their raw sum, and an optimizer that the sum's size changes
  (SGD-like, or clipping or a coupled L2 weight decay in the window): k times the mean gradient;
- a last backward before a step that passed `retain_graph=True`, whose buffers outlive the step and are then
  dropped with no backward through them (a later backward that frees some of them, a second optimizer's loss
  through the first one's graph, needed them);
- graph nodes still reachable after each step, growing from step to step;
- gradients clipped while a GradScaler's scale is still in them, and GradScaler's own refusals;
- a later backward from the same line, after a step, through a loss back-propagated with retain_graph=True (hooks
  on that loss's first nodes), "backward through the graph a second time", a saved tensor modified in place since;
- PyTorch's "Detected call of `lr_scheduler.step()` before `optimizer.step()`" warning.

The record is JSON: the steps seen, each observation, and the script's error with its traceback if it failed.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import traceback
import warnings
import weakref
from pathlib import Path
from contextlib import ExitStack
from types import FrameType
from typing import Any, Sequence
from unittest import mock

from torchlint.analysis.semantics import DECOUPLED_DECAY_OPTIMIZERS, SCALE_INVARIANT_OPTIMIZERS
from torchlint.verify.runner import SavedTensor, as_main, reachable, unpack
from torchlint.verify.signs import GRAPHS_KEPT, Sign

_HERE = str(Path(__file__).resolve().parent.parent)  # torchlint's own files are never the user's frames
SCHEDULER_WARNING = "Detected call of `lr_scheduler.step()` before `optimizer.step()`"
SECOND_BACKWARD = "Trying to backward through the graph a second time"
INPLACE = "modified by an inplace operation"
CLIPS = ("clip_grad_norm_", "clip_grad_value_")
# What cuts a value out of its graph, with the name the user wrote: methods, and the `.data` attribute.
CUTS = {"item": ".item()", "detach": ".detach()", "tolist": ".tolist()", "__float__": "float()"}
# The last op of a loss scaled for its window (`loss / k`, `loss * (1 / k)`).
SCALING_OPS = ("DivBackward0", "MulBackward0")
SCALER_ERRORS = ("No inf checks were recorded", "step() has already been called since the last update()",
                 "unscale_() has already been called on this optimizer since the last update()")


class _Stop(BaseException):
    """Raised from the step hook after N steps: ends the script, as KeyboardInterrupt would, but quietly."""


_USER: dict[str, str | None] = {}  # filename -> its resolved path when it is the script's own code, else None


def _user_file(name: str) -> str | None:
    found = _USER.get(name, "")
    if found == "":
        own = not (name.startswith(_HERE) or "site-packages" in name or "dist-packages" in name
                   or name.startswith("<") or name.startswith(sys.base_prefix) or name.startswith(sys.prefix))
        found = _USER[name] = str(Path(name).resolve()) if own else None
    return found


def user_frames(stack: Sequence[traceback.FrameSummary] | None = None) -> list[tuple[str, int]]:
    """(file, line) of the script's own frames, outermost first: not torch's, not torchlint's, not the standard
    library's or installed packages'. Read from the live frames (no source lines read), or from a traceback."""
    out = []
    if stack is not None:
        for f in stack:
            path = _user_file(f.filename)
            if path is not None:
                out.append((path, f.lineno or 0))
        return out
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        path = _user_file(frame.f_code.co_filename)
        if path is not None:
            out.append((path, frame.f_lineno))
        frame = frame.f_back
    out.reverse()
    return out


class Monitor:
    def __init__(self, torch, steps: int, count_graph: bool = True) -> None:
        self.torch = torch
        self.limit = steps
        self.count_graph = count_graph
        self.steps: list[dict] = []
        self.observations: list[dict] = []
        self.hooked: dict[int, object] = {}  # id(param) -> the parameter, with a gradient hook on it
        self.prev: dict[int, Any] = {}  # id(param) -> its gradient right after the last step
        self.prev_object: dict[int, object] = {}  # id(param) -> the .grad tensor itself after the last step
        # after a step whose last backward retained its graph: the buffers alive then, where that backward ran,
        # and the script's variable that reached the most of the graph then
        self.kept: tuple[list, list[tuple[str, int]], str | None] | None = None
        self.dropped = 0  # how many of them were gone when the backward after the step began
        self._seen: set[tuple] = set()  # (sign, innermost frame): one observation each
        self._new_window()

    def _new_window(self) -> None:
        """What is known of the step's window, from the last step on: set here, and again after every step."""
        self.backwards: list[list[tuple[str, int]]] = []  # where each backward ran
        self.retained: list[bool] = []  # did each backward pass retain_graph=True?
        self.roots: list[str | None] = []  # the last op of each back-propagated loss
        self.rooted: set[int] = set()  # id of each tensor back-propagated
        self.zero_grads: list[tuple[int, list[tuple[str, int]]]] = []  # (backwards before it, where)
        self.incoming: dict[int, Any] = {}  # id(param) -> the gradient the backwards brought
        self.scaled = False  # a GradScaler scaled a loss and nothing unscaled the gradients since
        self.scaled_from: dict[int, str | None] = {}  # id(a GradScaler's output) -> the last op of its input
        self.unscaled_by: float | None = None  # the scale the last unscale_ divided the gradients by
        self.clipped = False  # gradients clipped
        self.raw_sum: bool | None = None  # at the step: .grad is exactly what the window's backwards brought
        self.cuts: list[tuple] = []  # (frames, how, op, backwards before, reached cell)

    # -- recording ---------------------------------------------------------------------------------------------
    def observe(self, sign: Sign, frames: list[tuple[str, int]], message: str, **extra) -> None:
        key = (sign, tuple(frames[-1:]))
        if key in self._seen:
            return
        self._seen.add(key)
        self.observations.append({"sign": sign.value, "frames": frames, "message": message, "step": len(self.steps), **extra})

    # -- hooks ---------------------------------------------------------------------------------------------------
    def on_backward(self, retained: bool, tensors, grad_tensors) -> None:
        if self.kept is not None:
            self.dropped = sum(r() is None for r in self.kept[0])  # before this backward: not by a backward
        self.backwards.append(user_frames())
        self.retained.append(retained)
        self.raw_sum = None  # read before a clip: a backward after it adds to the gradients
        root = None
        if isinstance(tensors, self.torch.Tensor):
            self.rooted.add(id(tensors))
            if tensors.grad_fn is not None:
                if retained:
                    self._hook_total(tensors.grad_fn)
                if grad_tensors is None:
                    root = self.scaled_from.get(id(tensors)) or type(tensors.grad_fn).__name__
        self.roots.append(root)

    def _hook_total(self, root) -> None:
        """Hooks on the first node of a loss back-propagated with retain_graph=True and on the nodes that feed it
        (`total / k` is fed by `total`); not on deeper nodes (a graph built once before the loop, that every
        iteration's loss uses) nor on the parameters' accumulators (every backward runs those). Such a node runs
        again when a later backward from the same line goes through it after an optimizer step: a total that keeps
        every iteration's loss, whose earlier gradients are applied again at every step."""
        where, window = self.backwards[-1], len(self.steps)

        def prehook(grad_outputs):
            if len(self.steps) > window and self.backwards and self.backwards[-1][-1:] == where[-1:]:
                self.observe(Sign.TOTAL_BACKPROPAGATED_AGAIN, self.backwards[-1], "backward went again through a loss "
                             "total back-propagated before an earlier optimizer step (kept by retain_graph=True): the earlier iterations' "
                             "gradients are added again at every step")
            return None

        for node in (root, *(n for n, _ in root.next_functions)):
            if node is not None and type(node).__name__ != "AccumulateGrad":
                node.register_prehook(prehook)

    def after_backward(self) -> None:
        """Judge a graph kept past a step at the next backward that returns: needed if that backward went through it
        and freed some of it; wasted if some of it was dropped before, and the backward freed none of the rest."""
        if self.kept is None:
            return
        refs, where, holder = self.kept
        dead = sum(r() is None for r in refs)
        if dead > self.dropped:
            self.kept = None
        elif self.dropped:
            self.observe(Sign.RETAINED_GRAPH_OUTLIVES_STEP, where, "the last backward before the step passed retain_graph=True: "
                         f"{len(refs)} autograd buffers outlived the step into the next iteration"
                         + (f" (held through `{holder}`)" if holder else "")
                         + ", and were dropped without a backward through them", holder=holder)
            self.kept = None

    def on_cut(self, tensor, how: str) -> None:
        """A value taken out of `tensor` by the script's own line (the caller of the patched method). Only a tensor
        that carries a graph matters (not a loss already back-propagated, logged after its backward); a hook on it
        says whether a later backward of this window reaches it."""
        if tensor.grad_fn is None or id(tensor) in self.rooted or _user_file(sys._getframe(2).f_code.co_filename) is None:
            return
        reached = [False]

        def hook(grad):
            reached[0] = True

        try:
            tensor.register_hook(hook)
        except RuntimeError:  # a tensor autograd will not hook: nothing to say about it, and the script goes on
            return
        self.cuts.append((user_frames(), how, type(tensor.grad_fn).__name__, len(self.backwards), reached))

    def _check_cuts(self) -> None:
        """A cut before a backward of this window, of a tensor no backward reached. (A cut after the last
        backward, as when logging `loss.item()`, is judged by nothing: its graph was already used, or never is.)"""
        for frames, how, op, before, reached in self.cuts:
            if before < len(self.backwards) and not reached[0]:
                self.observe(Sign.CUT_TERM_WITHOUT_GRADIENT, frames, f"{how} took a value out of a tensor with a graph ({op}), and the "
                             "backward after it never reached that tensor: its term brought no gradient",
                             static_only=True)

    def on_zero_grad(self) -> None:
        self.zero_grads.append((len(self.backwards), user_frames()))

    def _track(self, optimizer) -> None:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if id(p) in self.hooked or not getattr(p, "requires_grad", False):
                    continue
                self.hooked[id(p)] = p
                p.register_hook(self._grad_hook(id(p)))

    def _grad_hook(self, key: int):
        def hook(grad):
            old = self.incoming.get(key)
            self.incoming[key] = grad.detach().clone() if old is None else old + grad.detach()
            return None
        return hook

    def pre_step(self, optimizer, args, kwargs) -> None:
        frames = user_frames()
        self._check_cuts()
        if _closure(args, kwargs):
            return  # a closure runs its own backwards inside the step (LBFGS)
        if self.raw_sum is None and len(self.backwards) > 1:
            self.raw_sum = self._raw_sum(p for g in optimizer.param_groups for p in g["params"])
        first = not self.steps
        if first and not self.backwards and not self.hooked:
            grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
            if not grads:
                self.observe(Sign.STEP_WITHOUT_BACKWARD, frames, "the optimizer stepped before any backward: the first step applies no "
                             "gradient, and each later step the gradient of the iteration before")
        if not first:
            self._check_stale(optimizer, frames)
            self._check_cleared(optimizer, frames)
        for before, where in self.zero_grads:
            if before:  # a zero_grad after a backward and before this step (the analysis says which one was wrong)
                self.observe(Sign.ZERO_GRAD_BETWEEN_BACKWARD_AND_STEP, where,
                             "zero_grad() ran after a backward and before the step", static_only=True)
        self._track(optimizer)

    def _check_stale(self, optimizer, frames) -> None:
        """`.grad` at this step, minus what the backwards since the last step brought, is exactly what it held after
        the last step: nothing cleared it in between. (Comparing with the last step's gradient, not with zero, keeps
        a GradScaler's in-place unscale_ from looking like a leftover.)"""
        torch = self.torch
        for group in optimizer.param_groups:
            for p in group["params"]:
                prev, incoming = self.prev.get(id(p)), self.incoming.get(id(p))
                if p.grad is None or prev is None or incoming is None or not p.grad.numel():
                    continue
                if p.grad is not self.prev_object.get(id(p)):
                    continue  # a new tensor: the old one was dropped (zero_grad(set_to_none=True), p.grad = None)
                scale = float(prev.abs().max())
                if scale == 0.0:
                    continue
                if torch.allclose(p.grad - incoming, prev, rtol=1e-4, atol=1e-6 * scale):
                    where = [f for b in self.backwards for f in b[-1:]]
                    self.observe(Sign.STALE_GRADIENT, frames, "the optimizer stepped with the gradient of its previous step still "
                                 "in .grad (never cleared): it applied the old sum plus this step's backward",
                                 backwards=where)
                    return

    def _raw_sum(self, params) -> bool | None:
        """Whether `.grad` is exactly the sum the backwards since the last step brought (after the GradScaler's
        unscale_, times its scale): nothing rescaled it by hand. Read at the step, or before a clip changes it, on
        the first of `params` that received a gradient; None when none did."""
        for p in params:
            key = id(p)
            incoming = self.incoming.get(key)
            if p.grad is None or incoming is None or not bool(incoming.abs().sum()):
                continue
            grad = p.grad if self.unscaled_by is None else p.grad * self.unscaled_by
            fresh = grad - self.prev[key] if p.grad is self.prev_object.get(key) else grad
            return bool(self.torch.allclose(fresh, incoming, rtol=1e-3, atol=1e-7 * float(incoming.abs().max())))
        return None

    def _check_window(self, optimizer, args, kwargs) -> None:
        """K backwards from one line, each of a loss not scaled for its window, summed into the step's
        gradient, for an optimizer whose update changes with the gradient's size."""
        lines = {tuple(b[-1:]) for b in self.backwards}
        if len(self.backwards) < 2 or len(lines) != 1 or not self.backwards[-1] or not self.raw_sum:
            return
        if _closure(args, kwargs):
            return  # LBFGS re-evaluates one loss several times in a step: no window
        if any(self.retained):
            return  # the backwards share one graph (each head of one forward): one loss in parts, not micro-batches
        if any(root is None or root in SCALING_OPS for root in self.roots):
            return
        names = {cls.__name__ for cls in type(optimizer).__mro__}
        invariant = names & SCALE_INVARIANT_OPTIMIZERS
        coupled = not names & DECOUPLED_DECAY_OPTIMIZERS and any(g.get("weight_decay") for g in optimizer.param_groups)
        if invariant and not self.clipped and not coupled:
            return  # Adam-like: the update is the same from the sum as from the mean
        k = len(self.backwards)
        self.observe(Sign.UNSCALED_WINDOW, self.backwards[-1], f"{k} backward calls from this line between two optimizer steps, "
                     f"the loss not divided: the step applied the sum of {k} gradients, {k}x their mean")

    def _check_cleared(self, optimizer, frames) -> None:
        if not self.backwards or not self.incoming or any(sign is Sign.STEP_WITHOUT_BACKWARD for sign, _ in self._seen):
            return  # a step before the backward explains cleared gradients
        params = [p for g in optimizer.param_groups for p in g["params"] if id(p) in self.incoming]
        if not params:
            return
        if all(p.grad is None or not bool(p.grad.abs().sum()) for p in params):
            after = [z for n, z in self.zero_grads if n == len(self.backwards)]
            where = after[-1] if after else frames
            self.observe(Sign.GRADIENTS_CLEARED_BEFORE_STEP, where, "the gradients were cleared after the backward and before the step: "
                         "the step applied nothing")

    def post_step(self, optimizer, args, kwargs) -> None:
        _prune()  # what autograd saved and has since freed
        torch = self.torch
        n = len(self.steps) + 1
        # the graph: at every step at first, then every 8th (a leak shows within 5 samples; long runs stay cheap)
        counted = self.count_graph and (n <= 8 or n % 8 == 0)
        record = {"backwards": len(self.backwards), "saved": len(_SAVED),
                  "graph_nodes": _graph_nodes(torch) if counted else None}
        self._check_window(optimizer, args, kwargs)
        self.steps.append(record)
        if self.retained and self.retained[-1] and record["saved"]:
            # the last backward before the step kept its graph, and its buffers are still alive after the step:
            # judged at the next backward (needed if it goes through them, wasted if they are dropped before)
            self.kept = (list(_SAVED), self.backwards[-1], _holder_of_graph(torch))
        for group in optimizer.param_groups:
            for p in group["params"]:
                if id(p) in self.hooked:
                    self.prev[id(p)] = p.grad.detach().clone() if p.grad is not None else None
                    self.prev_object[id(p)] = p.grad  # held, so that a new gradient tensor cannot reuse its id
        self._new_window()
        self._check_growth()
        if len(self.steps) >= self.limit:
            raise _Stop

    def _check_growth(self) -> None:
        """Graph nodes the script's variables hold after each step, growing at every one of the last 5 samples."""
        values = [s["graph_nodes"] for s in self.steps if s["graph_nodes"] is not None][-5:]
        if len(values) < 5 or self.steps[-1]["graph_nodes"] is None:
            return
        if all(b > a for a, b in zip(values, values[1:])) and not any(s in GRAPHS_KEPT for s, _ in self._seen):
            # (the graphs retain_graph keeps, and a total back-propagated again, have their own signs: one cause,
            # reported once)
            holder = _holder_of_graph(self.torch)
            self.observe(Sign.GRAPH_GROWS, user_frames(), "autograd graph nodes still reachable grow at every step "
                         f"({' -> '.join(map(str, values))})"
                         + (f"; `{holder}` holds the largest graph" if holder else ""), holder=holder)


def _closure(args, kwargs) -> bool:
    """Was the step given a closure (args[0] is the optimizer itself)?"""
    return bool(args[1:]) or kwargs.get("closure") is not None


_SAVED: list = []  # weak references to what autograd saved for backward, pruned at each step


def _roots(torch) -> dict[str, list]:
    """The tensors the script's frames hold, by variable: locals, items of the lists, tuples and dicts they hold,
    and the attributes of `self` (a Trainer keeping `self.total`). Reading these, not every object of the process
    (gc), keeps a step's cost in proportion to what the script keeps."""
    out: dict[str, list] = {}
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        if _user_file(frame.f_code.co_filename) is not None:
            for var, value in list(frame.f_locals.items()):
                items = [(var, value)]
                if var == "self" and hasattr(value, "__dict__") and not isinstance(value, torch.nn.Module):
                    items = [(f"self.{k}", v) for k, v in vars(value).items()]
                for name, v in items:
                    found = _tensors(torch, v, 2)
                    roots = [t.grad_fn for t in found if t.grad_fn is not None]
                    if roots:
                        out.setdefault(name, []).extend(roots)
        frame = frame.f_back
    return out


def _tensors(torch, value, depth: int) -> list:
    """Tensors in `value`: itself, or held by the lists, tuples and dicts it is made of, `depth` levels deep
    (records: a list of dicts of losses), at most 1000 items per container."""
    if isinstance(value, torch.Tensor):
        return [value]
    if depth == 0:
        return []
    if isinstance(value, (list, tuple)):
        items = value[:1000]
    elif isinstance(value, dict):
        items = list(value.values())[:1000]
    else:
        return []
    return [t for item in items for t in _tensors(torch, item, depth - 1)]


def _graph_nodes(torch) -> int:
    """Autograd nodes reachable from what the script's frames hold."""
    roots = _roots(torch)
    return reachable([n for nodes in roots.values() for n in nodes])


def _holder_of_graph(torch) -> str | None:
    """The variable of the script's frames that reaches the most graph nodes."""
    sizes = {name: reachable(nodes) for name, nodes in _roots(torch).items()}
    return max(sizes, key=sizes.__getitem__) if sizes else None


def run(script: Path, argv: list[str], steps: int, device: str) -> dict:
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    monitor = Monitor(torch, steps)
    scaler_cls = torch.amp.GradScaler
    # the functions the wrappers below call: taken before anything is patched
    original = {
        "backward": torch.autograd.backward, "opt_zero": torch.optim.Optimizer.zero_grad,
        "mod_zero": torch.nn.Module.zero_grad, "scale": scaler_cls.scale, "unscale_": scaler_cls.unscale_,
        **{n: getattr(torch.nn.utils, n) for n in CLIPS},
    }

    def backward(*a, **k):
        retain = k.get("retain_graph", a[2] if len(a) > 2 else None)
        monitor.on_backward(bool(retain), a[0] if a else k.get("tensors"),
                            k.get("grad_tensors", a[1] if len(a) > 1 else None))
        result = original["backward"](*a, **k)
        monitor.after_backward()
        return result

    def cutting(name):
        method = getattr(torch.Tensor, name)

        def cut(self, *a, **k):
            monitor.on_cut(self, CUTS[name])
            return method(self, *a, **k)
        return cut

    base_data = torch._C.TensorBase.data

    def get_data(self):
        monitor.on_cut(self, ".data")
        return base_data.__get__(self)  # type: ignore[attr-defined]  # a descriptor; torch's stubs say Tensor

    def zeroing(which):
        def zero_grad(self, *a, **k):
            monitor.on_zero_grad()
            return original[which](self, *a, **k)
        return zero_grad

    def scale(self, outputs):
        scaled = original["scale"](self, outputs)
        if self.is_enabled():
            monitor.scaled = True  # gradients of the next backward are multiplied by the scale
            if isinstance(outputs, torch.Tensor):
                monitor.scaled_from[id(scaled)] = type(outputs.grad_fn).__name__ if outputs.grad_fn else None
        return scaled

    def unscale_(self, optimizer):
        monitor.scaled = False
        if self.is_enabled():
            monitor.unscaled_by = self.get_scale()
        return original["unscale_"](self, optimizer)

    def clipping(name):
        def clip(*a, **k):
            monitor.clipped = True
            if monitor.raw_sum is None and len(monitor.backwards) > 1:
                monitor.raw_sum = monitor._raw_sum(monitor.hooked.values())
            if monitor.scaled and monitor.backwards:
                monitor.observe(Sign.CLIPPED_WHILE_SCALED, user_frames(), "gradients were clipped while still multiplied by the "
                                "GradScaler's scale (no unscale_ before the clip)")
            return original[name](*a, **k)
        return clip

    def show(message, category, filename, lineno, file=None, line=None):
        if SCHEDULER_WARNING in str(message):
            monitor.observe(Sign.SCHEDULER_BEFORE_OPTIMIZER_WARNING, user_frames(), "PyTorch warned: " + str(message).split("\n")[0][:200])
        return shown(message, category, filename, lineno, file, line)

    def pack(t):
        holder = SavedTensor(t)
        _SAVED.append(weakref.ref(holder))
        return holder

    error = tb = None
    stopped = False
    with ExitStack() as stack:
        # Every patch is undone and every hook removed when the script ends, however it ends.
        for owner, name, value in (
            (torch.autograd, "backward", backward), (torch.optim.Optimizer, "zero_grad", zeroing("opt_zero")),
            (torch.nn.Module, "zero_grad", zeroing("mod_zero")), (scaler_cls, "scale", scale),
            (scaler_cls, "unscale_", unscale_), *((torch.nn.utils, n, clipping(n)) for n in CLIPS),
            *((torch.Tensor, n, cutting(n)) for n in CUTS),
            (torch.Tensor, "data", property(get_data, base_data.__set__)),  # type: ignore[attr-defined]  # as above
        ):
            stack.enter_context(mock.patch.object(owner, name, value))
        stack.enter_context(warnings.catch_warnings())
        shown = warnings.showwarning
        warnings.showwarning = show
        warnings.simplefilter("always", UserWarning)
        stack.callback(register_optimizer_step_pre_hook(monitor.pre_step).remove)
        stack.callback(register_optimizer_step_post_hook(monitor.post_step).remove)
        stack.callback(_SAVED.clear)
        if device != "cpu":
            torch.set_default_device(device)
        try:
            with as_main(script, argv), torch.autograd.graph.saved_tensors_hooks(pack, unpack):
                runpy.run_path(str(script), run_name="__main__")
        except _Stop:
            stopped = True
        except SystemExit as exc:
            if exc.code not in (None, 0):
                error = f"SystemExit: {exc.code}"
        except BaseException as exc:  # the script's own failure is a result
            error = f"{type(exc).__name__}: {exc}"
            tb = traceback.format_exc()
            frames = user_frames(traceback.extract_tb(exc.__traceback__))
            if SECOND_BACKWARD in str(exc):
                # a total carried across iterations or a recurrent state fed back: the same error
                monitor.observe(Sign.BACKWARD_THROUGH_FREED_GRAPH, frames, "backward reached a graph that an earlier "
                                "backward had already freed: 'Trying to backward through the graph a second time'")
            elif INPLACE in str(exc):
                # what adding retain_graph=True to such a loop leads to: the step changed the weights that
                # the earlier graph, still back-propagated into, saved (other in-place edits raise it too: it only
                # confirms)
                monitor.observe(Sign.SAVED_TENSOR_MODIFIED, frames, "backward failed: a tensor the graph saved was "
                                "modified in place (an optimizer step changes the weights an earlier iteration's graph "
                                "saved)", static_only=True)
            elif any(m in str(exc) for m in SCALER_ERRORS):
                # GradScaler misuse, or gradients cleared before scaler.step left no inf checks
                monitor.observe(Sign.SCALER_REFUSED, frames, f"GradScaler refused: {str(exc).splitlines()[0][:160]}")
    return {"script": str(script), "device": device, "steps": monitor.steps, "stopped": stopped,
            "observations": monitor.observations, "error": error, "traceback": tb}


def _prune() -> None:
    _SAVED[:] = [r for r in _SAVED if r() is not None]


def run_many(scripts: Sequence[Path], steps: int = 20, device: str = "cpu", argv: Sequence[str] = ()) -> list[dict]:
    """Records of several scripts (each with the arguments `argv`), each in a fresh subprocess-free run, in one
    fresh process: what the tests use to check every fixture without starting torch once per script."""
    import subprocess
    import tempfile

    from torchlint.rules import attribute
    from torchlint.verify.process_group import run_group

    with tempfile.TemporaryDirectory(prefix="torchlint-monitor-") as tmp:
        code = ("import json, sys; from pathlib import Path; from torchlint.verify.monitor import run\n"
                "for i, s in enumerate(sys.argv[3:]):\n"
                f"    Path(sys.argv[2], f'{{i}}.json').write_text(json.dumps(run(Path(s), {list(argv)!r}, "
                f"int(sys.argv[1]), {device!r})))\n")
        log = Path(tmp) / "stderr"
        with open(log, "wb") as err:  # a file, not a pipe: a script that prints megabytes costs no memory here
            try:
                status = run_group([sys.executable, "-c", code, str(steps), tmp,
                                    *[str(Path(s).resolve()) for s in scripts]],
                                   900, stdout=subprocess.DEVNULL, stderr=err)
            except subprocess.TimeoutExpired:
                raise RuntimeError("the monitored runs took longer than 900 s; stopped") from None
        if status != 0:
            raise RuntimeError(f"monitor failed ({status}):\n{log.read_bytes()[-4000:].decode('utf-8', 'replace')}")
        return [attribute(json.loads((Path(tmp) / f"{i}.json").read_text())) for i in range(len(scripts))]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m torchlint.verify.monitor")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("script", type=Path)
    p.add_argument("args", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    record = run(args.script.resolve(), list(args.args), args.steps, args.device)
    args.out.write_text(json.dumps(record), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
