"""A value's kind does not depend on the order in which the rules happen to ask: every definition of every file
of the fixtures and the corpus gets the same kind asked first to last as last to first."""

from __future__ import annotations

import libcst as cst
import pytest

from tests.conftest import ROOT
from torchlint.analysis import FileModel
from torchlint.analysis.events import EventKind

FILES = sorted(ROOT.glob("fixtures/TL*/*/*.py")) + sorted(ROOT.glob("tests/corpus/**/*.py"))


def _kinds(text: str, reverse: bool) -> dict[tuple[int, int], str]:
    model = FileModel(cst.parse_module(text), text)
    asked = [(i, e) for i, scope in enumerate(model.scopes) for e in scope.events
             if e.kind is EventKind.ASSIGN and e.scope is scope.node]
    out = {}
    for i, e in reversed(asked) if reverse else asked:
        out[(i, e.seq)] = model.kinds.of_def(e, model.scopes[i]).name
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_kinds_do_not_depend_on_the_order_they_are_asked(path):
    text = path.read_text(encoding="utf-8")
    assert _kinds(text, reverse=False) == _kinds(text, reverse=True)
