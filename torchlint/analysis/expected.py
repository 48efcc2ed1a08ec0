"""Code written to misbehave on purpose: a test that checks PyTorch warns or raises.

`with pytest.warns(UserWarning):`, `with self.assertRaises(RuntimeError):`, or a function handed to
`self.assertWarnsRegex(UserWarning, pattern, call_sch_before_optim)`: the mistake is the point of the code, so no
rule reports inside it (a user would only add `# noqa`). Found from the text first: a file without these words
costs one search.
"""

from __future__ import annotations

import re

import libcst as cst

from torchlint.analysis.exprs import dotted
from torchlint.source.walk import walk
from torchlint.source.words import any_word

# unittest's and pytest's names for "the code below must warn / raise"
EXPECTING = frozenset({"warns", "raises", "deprecated_call", "assertWarns", "assertWarnsRegex", "assertRaises",
                       "assertRaisesRegex", "assertRaisesRegexp"})
_TEXT = re.compile(any_word(EXPECTING, r"\b"))


def expected_regions(module: cst.Module, text: str) -> set[int]:
    """ids of every node inside a region that is expected to warn or raise."""
    if not _TEXT.search(text):
        return set()
    defs: dict[str, cst.FunctionDef] = {}
    regions: list[cst.CSTNode] = []
    for node in walk(module, descend_scopes=True):
        if type(node) is cst.FunctionDef:
            defs.setdefault(node.name.value, node)
        elif type(node) is cst.With and any(_expecting(item.item) for item in node.items):
            regions.append(node.body)
        elif type(node) is cst.Call and _expecting(node):
            for arg in node.args:
                if type(arg.value) is cst.Lambda:
                    regions.append(arg.value)
                elif type(arg.value) is cst.Name:
                    regions.append(arg.value)  # resolved to its function below
    out: set[int] = set()
    for region in regions:
        if type(region) is cst.Name:
            target = defs.get(region.value)
            if target is None:
                continue
            region = target
        out.update(id(n) for n in walk(region, descend_scopes=True))
    return out


def _expecting(expr: cst.BaseExpression) -> bool:
    call = expr if type(expr) is cst.Call else None
    if call is None:
        return False
    name = dotted(call.func) or ""
    return name.rsplit(".", 1)[-1] in EXPECTING
