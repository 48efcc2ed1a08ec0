"""One word per concept: an event's variant is an enum member (`events.BackwardVia`, `AssignForm` ...), never a
string. The enums are plain `Enum`s, so `e.variant == "scaler"` would be silently false: no module compares the
field with a string literal, and every kind's variants are those `events.VARIANTS` names."""

from __future__ import annotations

import ast
from dataclasses import fields
from enum import Enum
from pathlib import Path

import libcst as cst
import pytest

from tests.conftest import ROOT
from torchlint.analysis import FileModel
from torchlint.analysis.events import VARIANTS, Event, EventKind, variant_named, variant_word

FIELD = "variant"


def _strings(node: ast.expr) -> bool:
    """A str constant, or a tuple / list / set of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
    return False


def _is_field(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == FIELD


def string_comparisons(source: str) -> list[int]:
    """Lines where `<x>.variant` is compared (==, !=, in, not in, is, is not) with a string literal."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for left, right in zip(operands, operands[1:]):
            if _is_field(left) and _strings(right) or _is_field(right) and _strings(left):
                lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("source, found", [
    ('e.variant == "scaler"', True),
    ('"=" != d.variant', True),
    ('e.variant in ("tuple0", "tuple")', True),
    ('e.variant not in {"for"}', True),
    ('e.variant is BackwardVia.SCALER', False),
    ('e.variant in (AssignForm.ADD, AssignForm.SELF_ADD)', False),
    ('e.kind == "backward"', False),
])
def test_the_check_finds_string_comparisons(source, found):
    assert bool(string_comparisons(source)) is found


def test_no_module_compares_a_variant_with_a_string():
    assert FIELD in {f.name for f in fields(Event)}  # the field the check looks for
    found = [f"{path.relative_to(ROOT)}:{line}" for path in sorted((ROOT / "torchlint").rglob("*.py"))
             for line in string_comparisons(path.read_text(encoding="utf-8"))]
    assert not found, found


def test_variants_are_plain_enums_written_as_their_values():
    for kind, enum in VARIANTS.items():
        assert issubclass(enum, Enum) and not issubclass(enum, str), enum
        for member in enum:
            assert variant_named(kind, variant_word(member)) is member
    assert variant_named(EventKind.STEP, variant_word(None)) is None


def test_every_event_of_the_fixtures_has_a_variant_of_its_kind():
    for path in sorted(Path(ROOT / "fixtures").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        try:
            model = FileModel(cst.parse_module(text), text)
        except cst.ParserSyntaxError:
            continue
        for scope in model.scopes:
            for e in list(scope.raw) + list(scope.events):
                allowed = VARIANTS.get(e.kind)
                assert e.variant is None or allowed is not None and isinstance(e.variant, allowed), (path, e)
