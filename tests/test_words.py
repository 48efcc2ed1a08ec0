"""torchlint.source.words: the fast spelling of `\\bword` finds exactly what `\\bword` finds."""

from __future__ import annotations

import re

from torchlint.source.words import any_word, word_start

TEXT = """
for x in xs: self.fit()  # for
_for = 1; before = 2; a.for_each(); for_(); xself.y; self .z; myself.w
global g
nonlocal_x = 1;nonlocal y
ITERATION_COMPLETED, Events.ITERATION_COMPLETED_X, xITERATION_COMPLETED
"""


def spans(pattern: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(pattern, TEXT)]


def test_word_start_matches_where_a_word_boundary_does():
    for word in ("for", "self", "global", "nonlocal", "ITERATION_COMPLETED", "_for"):
        assert spans(word_start(word)) == spans(r"\b" + re.escape(word)), word
    assert spans(word_start("self") + r"\s*\.") == spans(r"\bself\s*\.") != []


def test_any_word_is_an_alternation_of_word_starts_with_a_tail():
    pattern = any_word({"nonlocal", "global"}, r"\s")
    assert spans(pattern) == spans(r"\b(?:global|nonlocal)\s")
    assert [TEXT[a:b] for a, b in spans(pattern)] == ["global ", "nonlocal "]


CODE = """
for step, batch in enumerate(loader):  # while training
    loss = model(batch).loss; loss.backward(); x.manual_backward(loss); torch.autograd.grad(loss, w)
    scaler.step(opt); self.grad_Scaler.step(opt); SCALER . step (opt); ſcaler.step(opt)
    sched.step(); self.Scheduler.step(); ſched; lr_sched = LR(opt); ReduceLROnPlateau(opt)
    retain_graph=True, create_graph=True, x.backward(g, True); forwhile; fore = while_
    self.buf.append(loss); x.data; y.item(); float(z); Variable(a, requires_grad=True); torch.tensor(v, dtype)
"""


def test_branches_find_where_the_whole_pattern_matches():
    from torchlint.rules import ALL_RULES
    from torchlint.source.words import branches, occurs, starts

    patterns = {p for rule in ALL_RULES for c in rule.scope_conditions() for p in c}
    patterns |= {re.compile(r"(?:a|(?:b|c)d)e|[xy]z"), re.compile(r"[|]x|y"), re.compile(r"(a)b|\1"),
                 re.compile(r"(?:se|fo)*r"), re.compile(r"(?:x|lo)?ss")}
    split = [p for p in patterns if len(branches(p)) > 1]
    assert len(split) >= 8  # backward, loop and step calls, scheduler names, cuts ...
    for p in patterns:
        for text in (CODE, TEXT, CODE.upper(), ""):
            found = starts(p, text)
            assert found == sorted(set(found))
            # every match finditer finds, and only positions where the whole pattern matches
            assert {m.start() for m in p.finditer(text)} <= set(found), p.pattern
            assert all(p.match(text, i) for i in found), p.pattern
            assert occurs(p, text) == (p.search(text) is not None), p.pattern


def test_branches_split_only_the_top_level_alternation():
    from torchlint.source.words import branches

    def parts(pattern: str, flags: int = 0) -> list[str]:
        return [b.pattern for b in branches(re.compile(pattern, flags))]

    assert parts(r"\.backward\s*\(|manual_backward\s*\(") == [r"\.backward\s*\(", r"manual_backward\s*\("]
    assert parts(r"(?:f(?<!\wf)or|w(?<!\ww)hile)\b") == [r"f(?<!\wf)or\b", r"w(?<!\ww)hile\b"]  # a leading group
    assert parts(r"[sSſ](?i:ched)|LR\s*\(") == ["s(?i:ched)", "S(?i:ched)", "ſ(?i:ched)", r"LR\s*\("]
    assert parts(r"x(?:a|b)") == [r"x(?:a|b)"]  # inside a group that does not lead: one pattern
    assert parts(r"[|(<>]a|b\|c") == ["[|(<>]a", r"b\|c"]  # a class and an escape hold no alternation
    assert parts(r"[a-c]x|y") == ["[a-c]x", "y"]  # a range is not a few characters
    assert parts(r"(a)x|(b)\1") == [r"(a)x|(b)\1"]  # a backreference: group numbers would shift
    assert parts(r"(?i)ab|cd") == ["(?i)ab|cd"]  # flags for the whole pattern
    assert parts(r"(?:a|b)*x") == [r"(?:a|b)*x"] and parts(r"(?:a|b){2}x") == [r"(?:a|b){2}x"]  # a repeated group
    assert parts(r"(a)?(?(1)x|y)") == [r"(a)?(?(1)x|y)"]  # a conditional names a group by its number
    assert parts(r"a # or b|c", re.VERBOSE) == [r"a # or b|c"]  # a verbose pattern's `|` may be in a comment
    assert [b.flags & re.IGNORECASE for b in branches(re.compile("ab|cd", re.IGNORECASE))] == [re.IGNORECASE] * 2
