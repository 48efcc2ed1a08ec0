"""Stage 2: which rules can fire on a file, from the text each rule needs (`Rule.requires`), before parsing."""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from torchlint.rules import Rule, all_rules
from torchlint.rules.base import Requirement, TextTest
from torchlint.source.words import occurs


def select_rules(codes: Iterable[str] | None = None) -> list[type[Rule]]:
    if codes is None:
        return list(all_rules())
    wanted = set(codes)
    return [r for r in all_rules() if r.code in wanted]


def rules_that_may_fire(text: str, rules: Sequence[type[Rule]]) -> list[type[Rule]]:
    """The prefilter: the rules whose necessary text (`Rule.requires`) the file holds; with none, the file is not
    parsed. Each pattern is searched at most once, and most files fail the first (a backward call, a step call)."""
    found: dict[TextTest, bool] = {}
    return [rule for rule in rules if all(_has(p, text, found) for p in rule.requires)]


def _has(p: Requirement, text: str, found: dict[TextTest, bool]) -> bool:
    # Not a closure calling itself: that is a reference cycle, left for the cycle collector to find.
    if isinstance(p, tuple):
        return any(_has(q, text, found) for q in p)  # one of them (`Rule.requires`)
    hit = found.get(p)
    if hit is None:
        hit = found[p] = occurs(p, text) if isinstance(p, re.Pattern) else p.search(text) is not None
    return hit
