"""The shared model of a file's training loops (see `model.FileModel`)."""

from torchlint.analysis.events import Event, EventKind, Guard
from torchlint.analysis.model import FileModel, Loop, Scope

__all__ = ["Event", "EventKind", "FileModel", "Guard", "Loop", "Scope"]
