"""What every rule is: a code, documentation, and a query over the training-loop model."""

from __future__ import annotations

from dataclasses import dataclass
import re
from typing import ClassVar, Iterator

import libcst as cst

from torchlint.analysis import FileModel
from torchlint.diagnostic import Fix


BACKWARD_CALL = re.compile(r"\.backward\s*\(|manual_backward\s*\(|autograd\.grad\s*\(")


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
    # A file whose text does not match this cannot hold a finding of this rule and is not parsed for it.
    # Default: a backward call of any kind (all five mission rules need one, in the same file).
    requires: ClassVar[re.Pattern[str]] = BACKWARD_CALL
    doc: ClassVar[str]  # Markdown: why it is wrong, examples, fix, limits

    def check(self, model: FileModel) -> Iterator[Finding]:
        raise NotImplementedError
