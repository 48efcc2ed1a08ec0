"""Positions computed from the statement that holds a node (torchlint.source.positions): a node's innermost
statement is generated alone, with the indentation of the blocks around it, and placed at the line `ast` gives
that statement. Every node of every statement must get exactly the range libcst's PositionProvider gives it."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from tests.conftest import ROOT, positive_sources
from torchlint.engine import lint_source
from torchlint.source import positions as positions_module
from torchlint.source.walk import walk

# Layouts where generating a nested statement alone could go wrong: continuation lines inside brackets (their
# indentation comes from the blocks around), backslashes, tabs, CRLF and lone CR, comments and blank lines
# before a statement, `elif` (generated as `if` when alone), every kind of block, `a; b`, one-line suites,
# decorators, multi-line strings and non-ASCII text before a node.
ODD = [
    "def f(model, loader):\n    for x in loader:\n        loss = crit(\n            model(x),\n  y)\n"
    "        # lead\n\n        loss.backward(); opt.step()\n",
    "class T:\n\tdef fit(self):\n\t\tfor b in self.data:\n\t\t\ttotal = total + \\\n\t\t\t\tloss(b)\n"
    "\t\t\ttotal.backward()\n",
    "if a:\r\n    x = [1,\r\n         2]\r\nelif b:\r\n    y = 2\r\nelif c:  # c\r\n    z = 3\r\nelse:\r\n    w = 4\r\n",
    "for i in r:\r    s = (i +\r      1)\r    s.backward()\r",
    "try:\n    a = 1\nexcept E as e:\n    b = e\nexcept (F, G):\n    pass\nelse:\n    c = 3\nfinally:\n"
    "    d = 4\n",
    "async def g():\n    async for x in it:\n        async with m as n:\n            await n.step()\n"
    "    while t:\n        t -= 1\n    else:\n        done()\n",
    "match cmd:\n    case [x, y]:\n        go(x)\n    case {'k': v} if v:\n        stop(v)\n    case _:\n"
    "        pass\n",
    "@dec(\n    1)\n@other\ndef h(a,\n      b):\n    '''doc\n    more'''\n    return (a +\n            b)\n",
    "if x: a(); b()\nfor q in w: q.step()\nwith ctx(): c = 'é' + d(e)\n",
    "def k():\n    s = 'naïve ü'; t = f(s, g(1))\n    v = \"\"\"x\ny\"\"\" + h(2)\n    return v\n",
    "class A:\n    x = 1\n\n    class B:\n        y = [\n            2,\n        ]\n\n        def m(self):\n"
    "            if self.y:\n                return self.y\n",
]


def _statements_of(module: cst.Module) -> tuple[dict[int, int], dict[int, cst.CSTNode]]:
    """For every node: the index of its top-level statement, and its innermost statement (as the walker
    records an event's line: a simple statement line, or the compound statement whose header holds it)."""
    tops: dict[int, int] = {}
    inner: dict[int, cst.CSTNode] = {}
    for index, top in enumerate(module.body):
        for node in walk(top, descend_scopes=True):
            tops[id(node)] = index
            if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                for sub in walk(node, descend_scopes=True):  # outer statements first, inner ones override
                    inner[id(sub)] = node
    return tops, inner


def _sources() -> list[str]:
    fixtures = [p.read_text(encoding="utf-8") for p in sorted(ROOT.glob("fixtures/TL*/*/*.py"))]
    return ODD + fixtures + [src for _, src in positive_sources()]


@pytest.mark.parametrize("src", _sources(), ids=range(len(_sources())))
def test_every_node_placed_from_its_own_statement_as_libcst_places_it(src, monkeypatch):
    module = cst.parse_module(src)
    tops, inner = _statements_of(module)
    nodes = [n for top in module.body for n in walk(top, descend_scopes=True)]
    placed = {}
    place = positions_module._place_in_statements

    def counted(*args):
        place(*args)
        placed["n"] = len(args[-1])

    monkeypatch.setattr(positions_module, "_place_in_statements", counted)
    got = positions_module._positions_by_statement(module, src, nodes, tops, inner)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    for node in nodes:
        assert got[node] == expected[node], (type(node).__name__, cst.Module(body=[]).code_for_node(node)[:60])
    # Every node was placed from its own statement: no top-level statement had to be generated whole.
    assert placed["n"] == len(nodes)


def test_a_finding_deep_in_a_long_function_is_placed_from_its_line():
    """A finding in a loop at the end of a long function: its position is exact, and only its own line is
    generated (the function around it, hundreds of lines, is not)."""
    filler = "".join(f"    v{i} = compute({i}, (\n        {i} + 1))\n" for i in range(200))
    src = ("import torch\n\n\ndef train(model, loader, optimizer, criterion):\n" + filler
           + "    for x, y in loader:\n        loss = criterion(model(x), y)\n        loss.backward()\n"
           "        optimizer.step()\n")
    generated: list[int] = []
    original = positions_module._ranges

    def ranges(state, wanted):
        generated.append(len(state.tokens))
        return original(state, wanted)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(positions_module, "_ranges", ranges)
        got = [(d.line, d.column, d.end_line, d.end_column, d.code) for d in lint_source(src, "t.py")]
    assert got == [(408, 9, 408, 25, "TL004")]
    assert generated and max(generated) < 40  # tokens of one line, not of the whole function


def test_unpaired_shapes_fall_back_to_the_whole_statement():
    """Where libcst's and ast's statements do not line up (a one-line suite `if x: a; b` holds no statement of
    its own), the top-level statement is generated whole, and the position is still exact."""
    src = "for x, y in loader:\n    if x: loss = crit(x, y); loss.backward()\n    optimizer.step()\n"
    got = [(d.line, d.column, d.end_line, d.end_column, d.code) for d in lint_source(src, "t.py")]
    assert got == [(3, 5, 3, 21, "TL004")]
