"""Engine behaviour that every front end relies on: the prefilter, noqa parsing, internal errors."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import ROOT
from torchlint.engine import INTERNAL_ERROR, can_have_findings, lint_source
from torchlint.rules import ALL_RULES


@pytest.mark.parametrize(
    "text,expected",
    [
        ("loss.backward()", True),
        ("loss.backward ()", True),
        ("self.manual_backward(loss)", True),
        ("g = torch.autograd.grad(y, x)", True),
        ("accelerator.backward(loss)", True),
        ("class F(Function):\n    @staticmethod\n    def backward(ctx, g):\n        return g\n", False),
        ("optimizer.step()\nenv.step(a)\n", False),
        ("print('hello')", False),
    ],
)
def test_prefilter(text, expected):
    assert can_have_findings(text, ALL_RULES) is expected


def test_prefilter_never_hides_a_finding():
    """Every file with a finding in the fixtures and rule tests passes the prefilter."""
    import importlib

    sources = [p.read_text() for p in (ROOT / "fixtures").glob("*/*/bad.py")]
    for code in ("tl001", "tl002", "tl003", "tl004", "tl005"):
        mod = importlib.import_module(f"tests.rules.test_{code}")
        sources += [textwrap.dedent(src) for src, _ in mod.POSITIVE.values()]
    assert len(sources) >= 50
    for src in sources:
        assert lint_source(src, "t.py"), src
        assert can_have_findings(src, ALL_RULES), src


def test_rule_crash_becomes_one_diagnostic(monkeypatch):
    from torchlint.rules.tl004_missing_zero_grad import MissingZeroGrad

    def boom(self, model):
        raise ValueError("boom")
        yield

    monkeypatch.setattr(MissingZeroGrad, "check", boom)
    src = "for x in d:\n    loss.backward()\n    optimizer.step()\n"
    diags = lint_source(src, "t.py")
    assert [d.code for d in diags] == [INTERNAL_ERROR]
    assert "internal error in TL004 (ValueError: boom)" in diags[0].message


def test_deeply_nested_expression_does_not_crash():
    src = "loss.backward()\nx = " + "(" * 200 + "1" + ")" * 200 + "\n"
    diags = lint_source(src, "t.py")
    assert all(d.code.startswith("TL9") for d in diags)


def test_fix_producing_invalid_code_is_discarded_and_reported(monkeypatch):
    """A fix whose result does not parse is never applied; it is reported as TL903 and the text is unchanged."""
    import libcst as cst

    from torchlint.diagnostic import Fix
    from torchlint.engine import FIX_ERROR, fix_source
    from torchlint.rules.base import Finding
    from torchlint.rules.tl004_missing_zero_grad import MissingZeroGrad

    real_check = MissingZeroGrad.check

    def broken_fix(self, model):
        for f in real_check(self, model):
            # A compound statement where an expression belongs: the tree prints, the code does not parse.
            bad = cst.parse_statement("if x:\n    pass\n")
            yield Finding(f.node, f.message, Fix("unsafe", "broken", ((f.node, bad),)))

    monkeypatch.setattr(MissingZeroGrad, "check", broken_fix)
    src = "for x in d:\n    loss.backward()\n    optimizer.step()\n"
    result = fix_source(src, "t.py", unsafe=True)
    assert result.text == src and result.applied == 0
    assert [d.code for d in result.failed] == [FIX_ERROR]
    assert "fix for TL004 produced invalid code and was discarded" in result.failed[0].message


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_positions_of_identical_statements_and_crlf(newline):
    """Positions are computed per module-level statement; identical statements still get their own lines."""
    loop = "for x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"
    src = ("# header\n\n" + loop + "\n" + loop + "print('done')\n" + loop).replace("\n", newline)
    got = [(d.line, d.column, d.end_line, d.end_column, d.code) for d in lint_source(src, "t.py")]
    assert got == [(6, 5, 6, 21, "TL004"), (11, 5, 11, 21, "TL004"), (16, 5, 16, 21, "TL004")]


def test_users_syntax_warnings_are_not_printed(tmp_path, run_cli):
    """`x is 1` makes CPython's parser warn; that is the user's business, not noise on torchlint's stderr."""
    src = "x = 1\nif x is 1:\n    pass\n" + "".join(f"def f{i}():\n    return {i}\n" for i in range(200))
    (tmp_path / "t.py").write_text(src + "for a in b:\n    loss.backward()\n    opt.step()\n")
    r = run_cli("-q", "--no-cache", "t.py", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr == ""


def test_position_fallback_matches_fast_path(monkeypatch):
    """The fast position path (one code generation) and libcst's public provider agree."""
    from torchlint import engine

    src = "# c\n" + "for x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"
    fast = [(d.line, d.column, d.end_line, d.end_column) for d in lint_source(src, "t.py")]

    def no_internals(self, module):
        raise AttributeError("simulated: provider internals changed")

    monkeypatch.setattr(engine._CodeKeepingPositions, "_gen_impl", no_internals)
    assert [(d.line, d.column, d.end_line, d.end_column) for d in lint_source(src, "t.py")] == fast == [(5, 5, 5, 21)]
