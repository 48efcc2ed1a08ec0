"""The shared model of a file's training loops (see `model.FileModel`)."""

from torchlint.analysis.events import (
    AssignForm, BackwardVia, CallVia, ClipVia, Event, EventKind, Guard, ResetOf, StepVia, Variant, ZeroGradOf,
)
from torchlint.analysis.model import FileModel, Loop, Scope

__all__ = [
    "AssignForm", "BackwardVia", "CallVia", "ClipVia", "Event", "EventKind", "FileModel", "Guard", "Loop", "ResetOf",
    "Scope", "StepVia", "Variant", "ZeroGradOf",
]
