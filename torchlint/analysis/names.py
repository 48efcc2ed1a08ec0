"""What a name stands for: optimizer, scheduler, GradScaler, Accelerate/Fabric object, DeepSpeed engine.

Assignments in the file decide first (`opt = torch.optim.AdamW(...)`); conventional names decide otherwise
(`optimizer_G`, `self.opt`, `scheduler`), since training functions usually receive these as parameters.
"""

from __future__ import annotations

import re
from enum import Enum

import libcst as cst

from torchlint.analysis.exprs import dotted, last_part
from torchlint.analysis.semantics import scale_invariant


class Role(str, Enum):
    """What a name holds (its role in training), as far as the training loop cares."""

    OPTIMIZER = "optimizer"
    SCHEDULER = "scheduler"
    SCALER = "scaler"
    ACCELERATOR = "accelerator"
    ENGINE = "engine"
    OTHER = "other"


OPTIMIZER_CLASSES = frozenset(
    """SGD Adam AdamW Adamax Adagrad Adadelta RMSprop Rprop LBFGS NAdam RAdam SparseAdam ASGD Adafactor
    Lion Lamb LAMB FusedAdam FusedLAMB FusedSGD DeepSpeedCPUAdam Adam8bit AdamW8bit PagedAdamW PagedAdamW8bit
    SGDW AdaBelief Ranger Shampoo Muon Sophia ZeroRedundancyOptimizer LARS Novograd AdamP SGDP Yogi""".split()
)
_SCHEDULER_CLASS = re.compile(r"(LR|LRScheduler|Scheduler|ReduceLROnPlateau|_schedule\w*|Schedule\w*)$")

_OPTIMIZER_NAME = re.compile(
    r"^(optimi[sz]ers?(_?[a-z0-9]+)?|optim(_[a-z0-9_]+|[a-z0-9])?|opt([a-z]|\d+|_[a-z0-9_]+)?"
    r"|[a-z0-9_]+_(opt|optim|optimi[sz]er)|[a-z0-9]+optimi[sz]er)$"
)
_SCHEDULER_NAME = re.compile(r"(^|_)(lr_)?sched(uler)?s?(_?[a-z0-9]+)?$|^scheduler|^lr_schedule")
# A schedule of something else than the learning rate, whose `step()` does other work: a diffusion model's noise
# scheduler (diffusers' `noise_scheduler.step(out, t, x)` takes a sampling step), a pipeline-parallel schedule
# (`torch.distributed.pipelining`: `pipeline_schedule.step(batch)` runs the forwards and backwards), an annealing
# of a loss weight or of teacher forcing.
_OTHER_SCHEDULE = re.compile(r"(noise|beta|sigma|diffusion|ddpm|ddim|timestep|sampl\w*|pipeline|pp|kl|teacher|tf"
                             r"|forcing|temperature|curriculum)_?sched")
# the same by class: diffusers' schedulers (`DDPMScheduler`, `EulerDiscreteScheduler`, ...), torch's pipeline schedules
_OTHER_SCHEDULE_CLASS = re.compile(r"^diffusers\.|(DDPM|DDIM|PNDM|Euler|DPMSolver|LMS|Heun|KDPM|UniPC|DEIS|FlowMatch)"
                                   r"\w*Scheduler$|^Schedule(GPipe|1F1B|Interleaved|LoopedBFS|ZBV|DualPipe)|pipelining")
_SCALER_NAME = re.compile(r"(^|_)(grad_|amp_)?scaler(_?[a-z0-9]+)?$")
_ACCELERATOR_NAME = re.compile(r"^(accelerator|accel|fabric)$")
# (`self.deepspeed` is the DeepSpeedEngine of Hugging Face's Trainer, vendored by many repositories)
_ENGINE_NAME = re.compile(r"^(engine|model_engine|ds_engine|ds_model|deepspeed_engine|deepspeed)$")
_NOT_OPTIMIZER = frozenset({"opts", "optional", "option", "options", "optimize", "optimum"})


def role_of_value(value: cst.BaseExpression) -> Role | None:
    """What a right-hand side constructs, when it says so (`torch.optim.Adam(...)`, `GradScaler()`; OTHER for a
    schedule of something else than the learning rate, whatever the name it is bound to)."""
    if type(value) is cst.Call:
        name = dotted(value.func)
        if name is None:
            return None
        last = last_part(name)
        if _OTHER_SCHEDULE_CLASS.search(name):
            return Role.OTHER
        if "lr_scheduler" in name or _SCHEDULER_CLASS.search(last):
            return Role.SCHEDULER
        if last in OPTIMIZER_CLASSES or name.startswith(("torch.optim.", "optim.")) or last == "optimizers":
            return Role.OPTIMIZER
        if last == "GradScaler":
            return Role.SCALER
        if last in ("Accelerator", "Fabric"):
            return Role.ACCELERATOR
    return None


def family_named(call: cst.Call) -> bool:
    """A constructor whose class name says the optimizer family (`HybridAdam`, `CPUAdam`, `FusedSGD`)."""
    return scale_invariant(last_part(dotted(call.func) or "")) is not None


def role_of_name(name: str) -> Role:
    """What a conventional name stands for, from its last component (a private one too: `self._optimizer`)."""
    last = last_part(name).lower().lstrip("_")
    if _SCALER_NAME.search(last):
        return Role.SCALER
    if _SCHEDULER_NAME.search(last) and not _OTHER_SCHEDULE.search(last):
        return Role.SCHEDULER
    if _ACCELERATOR_NAME.match(last):
        return Role.ACCELERATOR
    if _ENGINE_NAME.match(last):
        return Role.ENGINE
    if last not in _NOT_OPTIMIZER and _OPTIMIZER_NAME.match(last):
        return Role.OPTIMIZER
    return Role.OTHER


class Symbols:
    """File-wide table of what names stand for, filled from assignments, queried by name."""

    def __init__(self) -> None:
        self._roles: dict[str, Role] = {}
        self.optimizer_models: dict[str, set[str]] = {}  # optimizer -> models whose parameters it owns
        self.scheduler_optimizer: dict[str, str] = {}  # scheduler -> the optimizer it was built on
        # accelerator -> does its backward() divide the loss by the accumulation steps? Accelerate's does when
        # the Accelerator is built with `gradient_accumulation_steps` (or a plugin); Fabric's never does.
        self.backward_divides: dict[str, bool] = {}
        self.optimizer_class: dict[str, cst.Call] = {}  # optimizer -> the constructor call that built it
        # names bound to a `GradScaler(...)`, and whether none of those constructions says `enabled=False`
        self.scaler_enabled: dict[str, bool] = {}
        # names bound to `scaler.scale(loss)` (the scaler's name and the loss), None when bound to anything else too
        self.scaled: dict[str, tuple[str, cst.BaseExpression] | None] = {}
        self._bound: set[str] = set()  # every name recorded so far (a later `scale` binding is then not the only one)

    def record(self, target: str, value: cst.BaseExpression, first: bool = True) -> None:
        """Learn from `target = value`; `first` is False for the later names of a tuple target."""
        self._record_scaled(target, _scale_of(value) if first else None)
        if type(value) is cst.Call and last_part(dotted(value.func) or "") == "innerloop_ctx":
            # `with higher.innerloop_ctx(model, opt) as (fmodel, diffopt):` a functional copy of the model and a
            # differentiable optimizer, whose `step(loss)` takes the gradients of the loss itself (no `.grad`)
            self._set(target, Role.OTHER)
            return
        if type(value) is cst.Call and dotted(value.func) == "deepspeed.initialize":
            # `engine, optimizer, _, _ = deepspeed.initialize(...)`: the engine steps and zeroes by itself.
            if first:
                self._set(target, Role.ENGINE)
            return
        role = role_of_value(value)
        if role is None:
            # `optimizer = HybridAdam(...)`, a class of another library whose name says its family, bound to a name
            # that says optimizer; `optimizer = GeminiOptimizer(optimizer, model)`: it updates as the wrapped one
            built = value if type(value) is cst.Call and family_named(value) else self._wrapped_optimizer(value)
            if built is not None and self.role(target) is Role.OPTIMIZER:
                self.optimizer_class[target] = self.optimizer_class[last_part(target)] = built
            return
        self._set(target, role)
        if role is Role.OPTIMIZER and type(value) is cst.Call:
            # A name bound to several optimizers in the file (one per stage of a loop, `opt = Adam(m.parameters())`
            # then `opt = Adam(ensemble.parameters())`) owns the models of each: the table is file-wide, so a
            # clearing of any of them may be the one for the binding a step reads. Not known once any is not.
            models, known = _models_in_params(value), self.optimizer_models.get(target)
            self.optimizer_models[target] = models | known if models and known else (models if known is None else set())
            self.optimizer_class[target] = self.optimizer_class[last_part(target)] = value
        if role is Role.SCALER and type(value) is cst.Call:
            for name in {target, last_part(target)}:
                self.scaler_enabled[name] = self.scaler_enabled.get(name, True) and not _disabled(value)
        if role is Role.ACCELERATOR and type(value) is cst.Call:
            self.backward_divides[target] = _accumulates(value)
        if role is Role.SCHEDULER and type(value) is cst.Call and value.args:
            # the optimizer is a scheduler's first argument (`StepLR(opt, 30)`); a factory's may be its options
            # (`get_scheduler(params, optimizer)`): then the argument named like an optimizer
            given = [n for a in value.args if a.keyword is None and (n := dotted(a.value)) is not None]
            named = [n for n in given if self.role(n) is Role.OPTIMIZER]
            opt = named[0] if named else dotted(value.args[0].value)
            if opt is not None:
                self.scheduler_optimizer[target] = opt

    def _record_scaled(self, target: str, scale: tuple[str, cst.BaseExpression] | None) -> None:
        """`scaled` keeps a name only while every binding of it recorded so far is one `scaler.scale(loss)` call, in
        whichever order the bindings come (`loss = criterion(...)` in one function, `loss = scaler.scale(loss)` in
        another: not known)."""
        if scale is None:
            if target in self.scaled:
                self.scaled[target] = None
        elif target in self._bound and self.scaled.get(target) != scale:
            self.scaled[target] = None
        else:
            self.scaled[target] = scale
        self._bound.add(target)

    def _wrapped_optimizer(self, value: cst.BaseExpression) -> cst.Call | None:
        """The constructor of the optimizer that a wrapper call takes as its first argument (a mixed-precision or
        sharding wrapper, `Lookahead(base)`), when the file built it."""
        if type(value) is not cst.Call or not value.args or value.args[0].keyword is not None:
            return None
        inner = dotted(value.args[0].value)
        return self.optimizer_class.get(inner) if inner is not None else None

    def _set(self, name: str, role: Role) -> None:
        self._roles[name] = role
        # `self.optimizer = ...` in __init__ names the same object as `optimizer` read elsewhere via self.
        self._roles.setdefault(last_part(name), role)

    def built_here(self, value: cst.BaseExpression) -> bool:
        """`value` constructs an optimizer, scheduler, scaler or accelerator."""
        return role_of_value(value) not in (None, Role.OTHER)

    def role(self, name: str | None) -> Role:
        if name is None:
            return Role.OTHER
        known = self._roles.get(name)
        if known is None and name.startswith("self."):
            known = self._roles.get(last_part(name))
        return known if known is not None else role_of_name(name)

    def is_(self, name: str | None, role: Role) -> bool:
        return self.role(name) is role

    def scaled_loss(self, name: str | None) -> tuple[str, cst.BaseExpression] | None:
        """The GradScaler and the loss of `scaled = scaler.scale(loss)`, when every binding of the name in the file
        is that one call."""
        found = self.scaled.get(name) if name is not None else None
        return found if found is not None and self.is_(found[0], Role.SCALER) else None


def _scale_of(value: cst.BaseExpression) -> tuple[str, cst.BaseExpression] | None:
    """`scaler.scale(loss)`: (the receiver's dotted name, the loss)."""
    if (type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value == "scale"
            and value.args and value.args[0].keyword is None):
        receiver = dotted(value.func.value)
        return (receiver, value.args[0].value) if receiver is not None else None
    return None


def _disabled(call: cst.Call) -> bool:
    """`GradScaler(enabled=False)`: scaling and unscaling are no-ops. Any other `enabled` value may be true."""
    return any(a.keyword is not None and a.keyword.value == "enabled" and type(a.value) is cst.Name
               and a.value.value == "False" for a in call.args)


def _accumulates(call: cst.Call) -> bool:
    """`Accelerator(gradient_accumulation_steps=k)` (k not the literal 1) or with a gradient accumulation
    plugin: its backward() divides the loss by k. `Fabric(...)` never divides."""
    if last_part(dotted(call.func) or "") != "Accelerator":
        return False
    for arg in call.args:
        key = arg.keyword.value if arg.keyword is not None else None
        if key == "gradient_accumulation_plugin":
            return True
        if key == "gradient_accumulation_steps":
            return not (type(arg.value) is cst.Integer and arg.value.value == "1")
        if arg.star == "**":
            return True  # built from a config: it may say so
    return False


def _models_in_params(call: cst.Call) -> set[str]:
    """`Adam(netD.parameters())` -> {"netD"}: which model's zero_grad clears this optimizer."""
    models: set[str] = set()
    for arg in call.args:
        node = arg.value
        if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in (
            "parameters",
            "named_parameters",
        ):
            name = dotted(node.func.value)
            if name:
                models.add(name)
    return models


_ROLE_WORDS = re.compile(r"^(lr_)?(scheduler|sched|optimizer|optimiser|optim|opt)_?|_?(scheduler|sched|optimizer|optimiser|optim|opt)$")


def role_suffix(name: str) -> str:
    """`schedulerG` -> "g", `optimizer_G` -> "g", `opt_d` -> "d", `optimizer` -> "": pairs schedulers with optimizers."""
    return _ROLE_WORDS.sub("", last_part(name).lower()).strip("_")
