"""Functions a framework's own loop runs once per training step: a LightningModule's `training_step`, and a
transformers (or trl) `Trainer` subclass's `compute_loss` and `training_step`. Each is one iteration of that loop
(a Loop with no head of its own), for the rules that ask what outlives an iteration."""

from __future__ import annotations

from typing import Callable

from torchlint.analysis.exprs import dotted, last_part
from torchlint.analysis.loops import Loop
from torchlint.analysis.model import FileModel

# The Trainer calls these once per step of its loop (its `training_step` calls `compute_loss`).
TRAINER_STEP_HOOKS = ("compute_loss", "training_step")
TRAINER_PACKAGES = ("transformers", "trl")


def derives_from(model: FileModel, name: str | None, wanted: Callable[[str], bool],
                 _seen: frozenset[str] = frozenset()) -> bool:
    """A class of this file with a base, directly or through the file's own classes, whose full name (an imported
    name read through the file's imports: `Trainer` of `from transformers import Trainer`) `wanted` accepts."""
    cls = model.classes.get(name or "")
    if cls is None or name in _seen:
        return False
    for base in cls.bases:
        written = dotted(base.value) or ""
        if wanted(model.full_name(written)) or derives_from(model, written, wanted, _seen | {name or ""}):
            return True
    return False


def _trainer(full: str) -> bool:
    return full.split(".", 1)[0] in TRAINER_PACKAGES and last_part(full).endswith("Trainer")


def _run_by(model: FileModel, hooks: tuple[str, ...], framework: Callable[[str], bool]) -> list[Loop]:
    """The methods named in `hooks` of the file's classes that derive from a `framework` class, each as one
    iteration of the framework's loop."""
    return [Loop(None, scope, scope.events) for scope in model.scopes  # type: ignore[arg-type]  # no head of its own
            if scope.name in hooks and derives_from(model, scope.class_name, framework)]


def trainer_steps(model: FileModel) -> list[Loop]:
    """A transformers or trl `Trainer` subclass's `compute_loss` and `training_step`: the Trainer's loop runs them
    once per step (and back-propagates what `compute_loss` returns)."""
    return _run_by(model, TRAINER_STEP_HOOKS, _trainer) if "Trainer" in model.text else []


def lightning_steps(model: FileModel) -> list[Loop]:
    """A LightningModule's `training_step` (a subclass's, directly or through the file's classes): Lightning's loop
    runs it once per batch."""
    return _run_by(model, ("training_step",), _lightning)


def _lightning(full: str) -> bool:
    return last_part(full) == "LightningModule"


def step_hooks(model: FileModel) -> list[Loop]:
    """Every function of the file a framework's loop runs once per training step."""
    return [*lightning_steps(model), *trainer_steps(model)]
