"""What every rule is: a code, documentation, and a query over the training-loop model."""

from __future__ import annotations

from dataclasses import dataclass
import re
from typing import Any, ClassVar, Iterator, Mapping, Protocol, Union

import libcst as cst

from torchlint.analysis import Event, FileModel
from torchlint.diagnostic import Fix
from torchlint.verify.signs import Sign


# Text patterns rules require (see Rule.requires). Each must match wherever the model could see the event.
# A word boundary before a word is written after its first letter (`f(?<!\wf)or`, the same as `\bfor`): `re` then
# looks for that letter, where a leading `\b` makes it try the whole pattern at every position of the file
# (4 to 30 times slower over the benchmark corpora, for the same matches): torchlint.source.words writes them.
BACKWARD_CALL = re.compile(r"\.backward\s*\(|manual_backward\s*\(|autograd\.grad\s*\(")
STEP_CALL = re.compile(r"\.\s*step\s*\(|optimizer_step\s*\(")  # optimizer.step(), scaler.step(opt), scheduler.step()
LOOP = re.compile(r"(?:f(?<!\wf)or|w(?<!\ww)hile)\b")  # \b(?:for|while)\b
DEF_TRAINING_STEP = re.compile(r"def(?<!\wdef)\s+training_step\b")  # \bdef\s+training_step\b
DEF_COMPUTE_LOSS = re.compile(r"def(?<!\wdef)\s+compute_loss\b")  # a Trainer subclass's hook


class TextTest(Protocol):
    """What the prefilter asks of a necessary text: a compiled pattern, or a test of its own with `search`."""

    @property
    def pattern(self) -> str: ...

    def search(self, string: str) -> object: ...


class _TrainingStepText:
    """Necessary text of a framework's step hook, whose backward the framework runs: a LightningModule's (or a
    Trainer subclass's) `training_step`, a Trainer subclass's `compute_loss`. Substring tests first (cheap on the
    files that lack them), then the definition."""

    pattern = DEF_TRAINING_STEP.pattern + "|" + DEF_COMPUTE_LOSS.pattern
    parts = (DEF_TRAINING_STEP, DEF_COMPUTE_LOSS)  # the patterns it runs

    def search(self, text: str) -> object:
        return ("training_step" in text and DEF_TRAINING_STEP.search(text) is not None
                or "compute_loss" in text and "Trainer" in text and DEF_COMPUTE_LOSS.search(text) is not None) or None


TRAINING_STEP_TEXT = _TrainingStepText()  # one object: the prefilter searches each test once per file


# One of `Rule.requires`: a text test, or a tuple of them of which one must hold (searched in order, each at most
# once per file: a rule asks for a common pattern first and a rarer, costlier one only where that fails).
Requirement = Union[TextTest, "tuple[TextTest, ...]"]


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
    # An entry that is a tuple holds when one of its tests does.
    requires: ClassVar[tuple[Requirement, ...]] = (BACKWARD_CALL, LOOP)
    # Necessary text of the function that holds a finding, read together with the helpers of the same file it
    # calls, two levels deep, as the model inlines them (torchlint.analysis.prune drops functions that fail it).
    # None: the same as `requires`; a rule whose trigger may sit elsewhere (a scheduler built in __init__) says
    # which part is local.
    scope_requires: ClassVar[tuple[re.Pattern[str], ...] | None] = None
    doc: ClassVar[str]  # Markdown: why it is wrong, examples, fix, limits

    # Other shapes of function that can hold a finding of this rule (each: the patterns it must all contain), for
    # findings outside a loop: a module's forward (TL008), Lightning's training_step (TL005), a wrapper (TL011).
    scope_alternatives: ClassVar[tuple[tuple[re.Pattern[str], ...], ...]] = ()

    # -- what the runtime checks need of the rule (`torchlint run`, `--fix --verify`, the fixtures' proofs) ------
    # The monitor's signs that show this rule's bug on a run (torchlint.verify.signs), and the signs another rule
    # owns that this bug may show too (the same error, "backward through the graph a second time", has two causes).
    runtime_signs: ClassVar[tuple[Sign, ...]] = ()
    runtime_also: ClassVar[tuple[Sign, ...]] = ()
    # Does the sign appear at the static finding's line? Otherwise a finding is confirmed by its rule's sign
    # anywhere (a state fed back is reported on the model call while the failing backward is elsewhere).
    runtime_same_line: ClassVar[bool] = False
    # What the fix promises, said by `--fix --verify` when the fixed run no longer shows the rule's signs.
    fix_promise: ClassVar[str] = ""
    # The error each buggy fixture (fixtures/TLNNN/SCENARIO/bad.py) raises when run, by scenario ("*": any other).
    fixture_errors: ClassVar[Mapping[str, str]] = {}
    # The bug wastes memory but keeps training as it is: the buggy fixture's steps match the reference's.
    fixture_keeps_training: ClassVar[bool] = False

    @classmethod
    def promise_kept(cls, line: int, original: dict[str, Any], fixed: dict[str, Any],
                     monitored: dict[str, Any]) -> str | None:
        """The property the fix promises, checked on the fixed run (`monitored`: its record under the monitor);
        None when the run breaks it. By default: none of the rule's own signs, other than those that are a bug
        only where the static analysis says so (`static_only`), shows on the fixed run."""
        seen = [o for o in monitored["observations"] if o["code"] == cls.code and not o.get("static_only")]
        return None if seen else cls.fix_promise or f"the run of the fixed script no longer shows {cls.code}"

    @classmethod
    def scope_patterns(cls) -> tuple[re.Pattern[str], ...]:
        if cls.scope_requires is not None:
            return cls.scope_requires
        # a rule whose `requires` holds a test that is not a pattern, or alternatives, states its scope_requires
        assert all(isinstance(p, re.Pattern) for p in cls.requires), cls.code
        return cls.requires  # type: ignore[return-value]  # patterns only (asserted)

    @classmethod
    def scope_conditions(cls) -> tuple[tuple[re.Pattern[str], ...], ...]:
        """Each way a function (with its helpers) can hold a finding: the patterns it must all contain."""
        return (cls.scope_patterns(),) + cls.scope_alternatives

    def check(self, model: FileModel) -> Iterator[Finding]:
        raise NotImplementedError
