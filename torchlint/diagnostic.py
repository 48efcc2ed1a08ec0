"""Data carriers shared by the engine, the rules and the front ends."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # libcst is not imported to read results from the cache
    import libcst as cst

    from torchlint.fixes import Replacement


@dataclass(frozen=True)
class Fix:
    """A libcst edit attached to a finding: each listed node (by identity) is replaced."""

    applicability: str  # "safe" keeps behaviour; "unsafe" changes it, to the correct behaviour
    message: str
    changes: tuple[tuple["cst.CSTNode", "Replacement"], ...]


@dataclass(frozen=True)
class Edit:
    """A text edit: replace [line:column, end_line:end_column) (1-based, end exclusive) by `content`."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str


@dataclass(frozen=True)
class FixInfo:
    """What the front ends show of a fix: its safety, what it does and the text edits it makes."""

    applicability: str
    message: str
    edits: tuple[Edit, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Diagnostic:
    path: str
    line: int  # 1-based
    column: int  # 1-based
    end_line: int
    end_column: int  # 1-based, exclusive
    code: str
    message: str
    fix: FixInfo | None = None
    cell: int | None = None  # notebooks: 1-based cell number; `line` then counts within the cell
    # `torchlint run`: "confirmed" (it happened in the run), "not observed" (in the steps run), "runtime only"
    runtime: str | None = None

    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.column, self.code)
