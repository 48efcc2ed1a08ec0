"""What the kinds engine and the summaries ask of the file they describe, as a protocol. The file model (the layer
above them) answers it, so they never import it: `kinds.KindInference(model)` and `summaries.summarize(model, scope)`
take any object with these members."""

from __future__ import annotations

from typing import Protocol

import libcst as cst

from torchlint.analysis.events import Event
from torchlint.analysis.foreign import ProjectLookup, Resolved
from torchlint.analysis.names import Symbols
from torchlint.analysis.scopes import Scope


class Keeping(Protocol):
    @property
    def keeps(self) -> frozenset[str]:
        """The parameters it keeps in an attribute of `self` (`summaries.Summary`)."""
        ...


class Makers(Protocol):
    def maker_of(self, scope: Scope, receiver: str) -> str | None:
        """The class or function imported from elsewhere that every binding of `receiver` calls (`receivers`)."""
        ...


class FileLookup(Protocol):
    scopes: list[Scope]  # the module body first, then every function and method
    classes: dict[str, cst.ClassDef]
    imported: set[str]  # names bound by import statements
    symbols: Symbols  # what names hold among optimizers, schedulers, scalers ...
    project: ProjectLookup | None  # the rest of the project; None when the file is checked alone
    text: str  # the source, for cheap textual questions

    @property
    def receivers(self) -> Makers:
        """Which class an object is, or what made it."""
        ...

    def resolve(self, caller: Scope, callee: str) -> Scope | None:
        """The function or method of this file that `callee(...)` called in `caller` reaches."""
        ...

    def external(self, scope: Scope, callee: str) -> Resolved | None:
        """The function or inherited method of another project file that `callee(...)` reaches."""
        ...

    def calls_of(self, scope: Scope) -> list[tuple[Scope, Event]]:
        """Each call of `scope`'s function in this file: the calling scope and its LOCAL_CALL event."""
        ...

    def is_module_class(self, name: str) -> bool:
        """A class of this file that derives from nn.Module."""
        ...

    def classify(self, e: Event) -> Event | None:
        """What a METHOD event is (see `classify`), memoised per event."""
        ...

    def summary(self, scope: Scope) -> Keeping:
        """What a function of this file does, as its callers see it (`summaries.Summary`), computed once."""
        ...
