r"""The rules' text patterns with a word boundary written after the first letter (`f(?<!\wf)or`, which `re` scans
for quickly) match exactly where the plain `\b` forms match."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT, positive_sources
from torchlint.rules.base import DEF_TRAINING_STEP, LOOP
from torchlint.rules.tl003_detached_loss_term import DETACHING
from torchlint.rules.tl011_scheduler_before_optimizer import SCHEDULER
from torchlint.rules.tl008_hidden_state_not_detached import HiddenStateNotDetached

PLAIN = {
    LOOP: r"\b(?:for|while)\b",
    DEF_TRAINING_STEP: r"\bdef\s+training_step\b",
    DETACHING: r"\.\s*(?:data\b|(?:item|detach|tolist)\s*\()|\bfloat\s*\(",
    SCHEDULER: r"(?i:sched)|LR\s*\(|ReduceLROnPlateau",
    HiddenStateNotDetached.scope_alternatives[0][0]: r"\bdef\s+forward\s*\(",
}
TRICKY = ("for x in y: while_ = 1; _for(); éfor; for_; x.for; 2for; fork; wfor; while(1); def  forward ( self)\n"
          "undef forward(x); def forwarded(); def training_step(self); mydef training_step; float(x); afloat(x);"
          " x.float(); ſched; SCHED; Scheduler; reschedule; LR(1); xLR (2); ReduceLROnPlateau; x . item ()")


@pytest.mark.parametrize("pattern", list(PLAIN), ids=lambda p: p.pattern)
def test_fast_pattern_matches_where_the_plain_one_does(pattern):
    plain = re.compile(PLAIN[pattern])
    texts = [TRICKY] + [src for _, src in positive_sources()]
    texts += [p.read_text(encoding="utf-8", errors="replace") for p in sorted(ROOT.glob("torchlint/**/*.py"))]
    for text in texts:
        assert [m.span() for m in pattern.finditer(text)] == [m.span() for m in plain.finditer(text)]
