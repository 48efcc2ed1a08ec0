"""What a file's model may know of the project's other files: their exports (per function and method, what a
caller needs: steps, clears, trains, returns, the per-batch events a caller's iteration gains at the call), and the
lookup the project answers (`ProjectLookup`). The project, above the file model, implements the lookup; the model
only sees this protocol, so it never imports the project."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Protocol


@dataclass
class ExportedEvent:
    kind: str  # an EventKind value
    target: str | None
    variant: str  # the event's variant as `events.variant_word` writes it
    via: str | None
    line: int
    contexts: tuple[str, ...] = ()


@dataclass
class FunctionExport:
    line: int
    params: list[str]  # positional order, `self` included for methods
    trains: bool  # holds its own training loop (a run of its own)
    steps: list[str]  # optimizers it steps, as named in the function
    events: list[ExportedEvent]  # per-batch events a caller's iteration gains at the call (unguarded only)
    zeroes: bool  # clears gradients somewhere (guarded or not)
    handed: list[str]  # its parameters (and `self`) that it hands to calls its own file cannot resolve
    returns: str  # a VKind name
    # when every `return` gives a tuple literal of one length: the VKind name of each element (else empty)
    items: list[str] = field(default_factory=list)
    # per element of `items`: the index of another element it is a term of in every `return` (-1: none)
    parts: list[int] = field(default_factory=list)
    # per element of `items`: the VKind name of each entry of the dict it is in every `return`, by literal key
    # ("*": entries whose key is not a literal); {} when not a dict
    values: list[dict[str, str]] = field(default_factory=list)
    dict_values: dict[str, str] = field(default_factory=dict)  # the same when every `return` gives a dict itself
    passes: list[str] = field(default_factory=list)  # parameters a return passes on with their graph (`passing`)
    clamps: bool = False  # registers a gradient hook that clamps (`exprs.clamping_hook`): it sees scaled gradients


@dataclass
class Exports:
    functions: dict[str, FunctionExport] = field(default_factory=dict)
    # class -> its methods that may act (`acting`); its bases are read from the text (`Project.bases`)
    classes: dict[str, dict[str, FunctionExport]] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, data: str) -> "Exports":
        raw = json.loads(data)

        def fn(d: dict) -> FunctionExport:
            events = [ExportedEvent(**{**e, "contexts": tuple(e["contexts"])}) for e in d.pop("events")]
            return FunctionExport(events=events, **d)

        return cls(
            {k: fn(v) for k, v in raw["functions"].items()},
            {k: {m: fn(f) for m, f in methods.items()} for k, methods in raw["classes"].items()},
        )


@dataclass(frozen=True)
class Signature:
    """How a function may be called (`self` left out for a method): its positional parameters in order, how many
    of them need an argument, `*args`, its keyword-only parameters and those of them without a default, `**kw`."""

    positional: tuple[str, ...]
    required: int
    star: bool
    keywords: tuple[str, ...]
    required_keywords: tuple[str, ...]
    double_star: bool


@dataclass(frozen=True)
class Resolved:
    """A callee in another file of the project: what it does, and where it is (for messages)."""

    export: FunctionExport
    path: str  # as shown in messages: relative to the project root
    name: str


@dataclass(frozen=True)
class CallerUse:
    """A call, in another project file, of a function or method of the viewing file (`ProjectLookup.callers`).
    Arguments are named by their position among the call's arguments (`"0"`, `"1"` ...) or by their keyword."""

    path: str  # the caller's file, as shown in messages
    line: int  # the call's
    looped: bool  # inside a loop of its function, not under `no_grad` / `inference_mode`
    outlives: bool  # a method's receiver is not rebound in that loop (it keeps what each iteration gives it)
    backpropagated: frozenset[int]  # the items of the result (-1: the whole result) that reach a backward there
    attached: frozenset[str]  # arguments whose value (or an item of it) a backward of the call's loop reaches
    outputs: frozenset[str]  # arguments bound only to what calling a model object returned (`out = net(x)`)
    backward_line: int  # the backward that reaches the result, if any (0: none)
    # a method called on a name (or `self.name`) the caller binds to an instance of its class (`attached` then
    # leaves out a value back-propagated whole: the caller's own check, `keeping.kept_by_objects`, reports it)
    direct: bool = False
    # `project_runs`: the loop around the call clears gradients itself, or hands the instance to another call
    clears: bool = False
    # arguments bound (every binding the caller has) to an instance of a class of a project file, an object that
    # outlives the call's loop (`self.stats`, a name bound before it): (argument, the class's file, the class)
    objects: tuple[tuple[str, str, str], ...] = ()


class ProjectLookup(Protocol):
    """The questions a file model asks of the rest of its project (`project.ProjectView` answers them)."""

    def modules(self) -> set[str]:
        """Local names that may be bound to modules of the project (`import engine`)."""
        ...

    def module_files(self) -> set[str]:
        """Local names bound to a module of the project that is one of its files (`from src import engine`, with
        src/engine.py): a call through one is a function of that file, whatever its name (`engine.step(...)` is no
        optimizer's step)."""
        ...

    def star_names(self) -> frozenset[str]:
        """The names `from module import *` of a project file binds (its top-level functions and classes)."""
        ...

    def function(self, dotted: str) -> Resolved | None:
        """The function of another project file that a call of `dotted` reaches, if any."""
        ...

    def inert(self, dotted: str) -> bool:
        """Does a call of `dotted` reach a function of another project file that can neither act nor clear
        gradients?"""
        ...

    def method(self, bases: list[str], name: str) -> Resolved | None:
        """The method `name` that a class with these bases inherits from another project file, if any."""
        ...

    def module_base(self, base: str) -> bool:
        """Does this base (as written) derive from nn.Module through the project's classes?"""
        ...

    def function_call(self, name: str) -> Signature | None:
        """How the function of another project file that the file imports as `name` may be called (for a call of
        it that raises TypeError: `arity`); None for a class, a decorated function, or one not found."""
        ...

    def instance_call(self, dotted: str, forward: Signature | None) -> Signature | None:
        """What calling the object that `dotted(...)` gives runs, when `dotted` is a class of another project file
        or a function there that returns an instance of one (through `.to(device)`, `nn.DataParallel(...)`): the
        first `__call__` along its classes, else, for a module, `forward` (`forward`: the one a subclass of this
        file defines, if any). None when not known (a base outside the project other than nn.Module's)."""
        ...

    def rate_setter(self, dotted: str) -> bool:
        """Is this name (as written) a class of another project file that derives from nothing outside that file
        (no base, `object`, or such classes of the same file) and writes a learning rate into param groups
        itself (`group["lr"] = lr`)?"""
        ...

    def imports_project_files(self) -> bool:
        """Does an import of the file name a file of the project (without one, `kept` knows no class)?"""
        ...

    def kept(self, cls: str, method: str) -> tuple[tuple[str, ...], frozenset[str]] | None:
        """`cls.method` for `cls` (as written) a class of another project file: the method's positional parameters
        (`self` included) and those it keeps in an attribute of `self` (a meter's `update(val)`: `self.sum +=
        val`; a collector's `__setitem__` that appends its value); None when not known."""
        ...

    def detaches(self, cls: str, method: str) -> bool:
        """Does `cls.method`, for `cls` (as written) a class of another project file, cut the state its object
        keeps from the graph (`self.hidden = self.hidden.detach()`, `h.detach_()`)? False when not known."""
        ...

    def returned(self, dotted: str) -> Resolved | None:
        """The function of another project file that `dotted(...)` calls, whatever it does (one that cannot act
        too: a loss function), with what it returns; asked only where the answer matters (a function that
        back-propagates), since the callee's file is parsed for it."""
        ...

    def instance_returned(self, maker: str, method: str) -> Resolved | None:
        """`method` (`__call__` for calling the object) of the object `maker(...)` gives, when `maker` (as written)
        is a class of another project file or a function there whose return annotation names one, with what it
        returns; parsed, like `returned`, only where the answer matters."""
        ...

    def passed_on(self, maker: str, method: str) -> tuple[tuple[str, ...], frozenset[str]] | None:
        """`method` of the object `maker(...)` gives (as `instance_returned` finds it): its positional parameters
        (`self` included) and those it never back-propagates, itself, through its file's helpers, by handing them
        to calls its file cannot follow or by storing them for another method of its class that may
        (`handing.passive_params`); None when not known."""
        ...

    def function_passed_on(self, dotted: str) -> tuple[tuple[str, ...], frozenset[str]] | None:
        """The same for a top-level function of another project file that `dotted(...)` calls."""
        ...

    def steps_clipping(self, maker: str) -> bool:
        """The object `maker(...)` gives (as `instance_returned` finds it) is an optimizer whose own `step()` clips
        the gradients (`clip_grad_norm_(p, group["max_grad_norm"])` in BERT's Adam): it sees their size."""
        ...

    def callers(self, name: str) -> tuple[CallerUse, ...]:
        """The calls of the viewing file's function `name` (or method `Class.name`) in the project's other files
        near it (`project_callers`); asked only for a file with no backward, of a helper that may need them."""
        ...

    def kept_in(self, path: str, cls: str, method: str) -> tuple[tuple[str, ...], frozenset[str]] | None:
        """`kept` for the class `cls` of the project file at `path` (`CallerUse.objects`)."""
        ...

    def runs(self, name: str) -> tuple[CallerUse, ...]:
        """The calls of the viewing file's method `Class.name` on an instance of the class in the project's other
        files, each in a loop (`project_runs`: a training-step method run once per iteration); asked only for a
        method whose own file shows a rule's premise and that no function of its file calls."""
        ...


def event_text(exp: FunctionExport) -> str:
    """Text standing for a callee's events, for the prefilter: `.backward(`, `.step(` ..."""
    words = {
        "backward": ".backward(", "step": ".step(", "zero_grad": "zero_grad(", "scheduler_step": ".step(",
        "clip_grad": "clip_grad_norm_(", "scaler_update": ".update(", "scaler_unscale": ".unscale_(",
    }
    out = [words[e.kind] for e in exp.events if e.kind in words]
    if exp.trains or exp.steps:
        out.append(".step(")
    if exp.zeroes:
        out.append("zero_grad(")
    if exp.clamps:
        out.append("register_hook(")
    return " ".join(dict.fromkeys(out))
