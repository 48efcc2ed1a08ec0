"""What every rule is: a code, documentation, and a query over the training-loop model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Iterator

import libcst as cst

from torchlint.analysis import FileModel
from torchlint.diagnostic import Fix


@dataclass(frozen=True)
class Finding:
    node: cst.CSTNode  # where the diagnostic points
    message: str
    fix: Fix | None = None


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case, e.g. "missing-zero-grad"
    summary: ClassVar[str]  # one line
    fix_safety: ClassVar[str | None] = None  # "safe", "unsafe", "safe or unsafe", or None when there is no fix
    # A file whose text contains none of these cannot hold a finding of this rule and is not parsed for it.
    requires: ClassVar[tuple[str, ...]] = ("backward", "autograd")
    doc: ClassVar[str]  # Markdown: why it is wrong, examples, fix, limits

    def check(self, model: FileModel) -> Iterator[Finding]:
        raise NotImplementedError
