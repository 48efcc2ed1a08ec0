"""torchlint.source.walk: the read-only walks reach every node that can hold an expression, and only nodes."""

from __future__ import annotations

import dataclasses

import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings

from tests.conftest import ROOT
from torchlint.source.walk import _SKIP, children, walk

SOURCES = sorted(ROOT.glob("fixtures/TL*/*/*.py")) + sorted(ROOT.glob("tests/corpus/**/*.py"))


def _check_children(module: cst.Module) -> int:
    """Every node's children are nodes: `children` hands on libcst's sequences (`Call.args`, `Module.body`) whole,
    relying on libcst keeping nodes only in them. Against the fields read anew: each child is the value of a field
    `children` reads, or an item of one."""
    seen = 0
    for node in walk(module, descend_scopes=True):
        kids = children(node)
        assert all(isinstance(k, cst.CSTNode) for k in kids), type(node).__name__
        expected: list[cst.CSTNode] = []
        for f in dataclasses.fields(node):
            if _SKIP.search(f.name):
                continue
            value = getattr(node, f.name)
            items = value if isinstance(value, (list, tuple)) else [value]
            expected += [v for v in items if isinstance(v, cst.CSTNode)]
        assert [id(k) for k in kids] == [id(k) for k in expected], type(node).__name__
        seen += 1
    return seen


@pytest.mark.parametrize("path", SOURCES[:40], ids=lambda p: str(p.relative_to(ROOT)))
def test_children_are_the_nodes_of_the_fields_walked(path):
    assert _check_children(cst.parse_module(path.read_text(encoding="utf-8"))) > 10


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(hypothesmith.from_grammar())
def test_children_of_any_parsed_text_are_nodes(text):
    try:
        module = cst.parse_module(text)
    except Exception:  # noqa: BLE001 - text libcst refuses has no tree to walk
        return
    _check_children(module)
