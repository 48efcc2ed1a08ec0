"""The core checks a node's class with `type(node) is cst.X` on its hot paths (isinstance against libcst's classes
goes through ABCMeta's Python-level __instancecheck__ whenever the answer is no). That is the same as isinstance
only while X has no subclasses: every class so checked must be a leaf of libcst's hierarchy."""

from __future__ import annotations

import re

import libcst as cst

from tests.conftest import ROOT

EXACT = re.compile(r"type\([^)]*\) (?:is not|is|not in|in) (\(cst\.\w+(?:, cst\.\w+)*\)|cst\.\w+)")


def test_classes_checked_by_exact_type_have_no_subclasses():
    checked: set[str] = set()
    for path in sorted((ROOT / "torchlint").rglob("*.py")):
        for m in EXACT.finditer(path.read_text(encoding="utf-8")):
            checked.update(re.findall(r"cst\.(\w+)", m.group(1)))
    assert {"Attribute", "Name", "Call", "SimpleStatementLine", "If", "For"} <= checked
    for name in sorted(checked):
        cls = getattr(cst, name)
        assert not cls.__subclasses__(), f"cst.{name} has subclasses: an exact type check would miss them"
