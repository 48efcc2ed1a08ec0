"""What every rule is: a code, documentation, and a query over the training-loop model."""

from __future__ import annotations

from dataclasses import dataclass
import re
from typing import ClassVar, Iterator

import libcst as cst

from torchlint.analysis import Event, FileModel
from torchlint.diagnostic import Fix


# Text patterns rules require (see Rule.requires). Each must match wherever the model could see the event.
# A word boundary before a word is written after its first letter (`f(?<!\wf)or`, the same as `\bfor`): `re` then
# looks for that letter, where a leading `\b` makes it try the whole pattern at every position of the file
# (4 to 30 times slower over the benchmark corpora, for the same matches).
BACKWARD_CALL = re.compile(r"\.backward\s*\(|manual_backward\s*\(|autograd\.grad\s*\(")
STEP_CALL = re.compile(r"\.\s*step\s*\(")  # optimizer.step(), scaler.step(opt), scheduler.step()
LOOP = re.compile(r"(?:f(?<!\wf)or|w(?<!\ww)hile)\b")  # \b(?:for|while)\b
DEF_TRAINING_STEP = re.compile(r"def(?<!\wdef)\s+training_step\b")  # \bdef\s+training_step\b


def where(e: Event) -> str:
    """` (engine.py:12)` when the event comes from another file of the project (its line there), else ``."""
    return f" ({e.origin[0]}:{e.origin[1]})" if e.origin is not None else ""


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
    # Necessary text: a file that does not match every one of these patterns cannot hold a finding of this rule
    # and is not parsed for it (the prefilter). Each must be a necessary condition, never a heuristic.
    requires: ClassVar[tuple[re.Pattern[str], ...]] = (BACKWARD_CALL, LOOP)
    # Necessary text of the function that holds a finding, read together with the helpers of the same file it
    # calls, two levels deep, as the model inlines them (torchlint.analysis.prune drops functions that fail it).
    # None: the same as `requires`; a rule whose trigger may sit elsewhere (a scheduler built in __init__) says
    # which part is local.
    scope_requires: ClassVar[tuple[re.Pattern[str], ...] | None] = None
    doc: ClassVar[str]  # Markdown: why it is wrong, examples, fix, limits

    # Other shapes of function that can hold a finding of this rule (each: the patterns it must all contain), for
    # findings outside a loop: a module's forward (TL008), Lightning's training_step (TL005), a wrapper (TL011).
    scope_alternatives: ClassVar[tuple[tuple[re.Pattern[str], ...], ...]] = ()

    @classmethod
    def scope_patterns(cls) -> tuple[re.Pattern[str], ...]:
        return cls.requires if cls.scope_requires is None else cls.scope_requires

    @classmethod
    def scope_conditions(cls) -> tuple[tuple[re.Pattern[str], ...], ...]:
        """Each way a function (with its helpers) can hold a finding: the patterns it must all contain."""
        return (cls.scope_patterns(),) + cls.scope_alternatives

    def check(self, model: FileModel) -> Iterator[Finding]:
        raise NotImplementedError
