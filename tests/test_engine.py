"""Engine behaviour that every front end relies on: the prefilter, noqa parsing, internal errors."""

from __future__ import annotations

import re

import pytest

from tests.conftest import positive_sources
from torchlint.engine import INTERNAL_ERROR, lint_source, rules_that_may_fire
from torchlint.rules import ALL_RULES
from torchlint.source import positions as positions_module
from torchlint.source.words import branches


@pytest.mark.parametrize(
    "text,expected",
    [
        ("for x in data:\n    loss.backward()", True),
        ("for x in data:\n    loss.backward ()", True),
        ("while True:\n    self.manual_backward(loss)", True),
        ("for x in xs:\n    g = torch.autograd.grad(y, x)", True),
        ("for b in loader:\n    accelerator.backward(loss)", True),
        ("loss = a + b.item()\nloss.backward()", True),  # TL003 needs no loop
        ("for _ in range(3):\n    scheduler.step()\n    optimizer.step()\n", True),  # TL011 needs no backward
        ("loss.backward()", False),  # one backward, no loop, nothing detached: no rule can fire
        ("class F(Function):\n    @staticmethod\n    def backward(ctx, g):\n        return g\n", False),
        ("for _ in range(3):\n    optimizer.step()\n    env.step(a)\n", False),  # steps, no backward or scheduler
        ("class Scheduler:\n    def run(self):\n        for n in self.nodes:\n            n.codegen()\n", False),
        ("print('hello')", False),
    ],
)
def test_prefilter(text, expected):
    assert bool(rules_that_may_fire(text, ALL_RULES)) is expected


def test_prefilter_never_hides_a_finding():
    """Run every rule directly on the model of every fixture and positive example, without the prefilter: each
    rule that finds something there must be one the prefilter lets through. And the expected rule is reported."""
    import libcst as cst

    from torchlint.analysis import FileModel

    sources = list(positive_sources())
    assert len(sources) >= 11 * 8
    for code, src in sources:
        model = FileModel(cst.parse_module(src), src)
        unfiltered = {rule for rule in ALL_RULES if list(rule().check(model))}
        assert unfiltered <= set(rules_that_may_fire(src, ALL_RULES)), (sorted(r.code for r in unfiltered), src)
        assert code in {d.code for d in lint_source(src, "t.py")}, src


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

    src = "# c\n" + "for x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"
    fast = [(d.line, d.column, d.end_line, d.end_column) for d in lint_source(src, "t.py")]

    def no_internals(*args, **kwargs):
        raise AttributeError("simulated: libcst code generation internals changed")

    provider = positions_module.MetadataWrapper
    used = []

    def wrapper(*args, **kwargs):
        used.append(True)
        return provider(*args, **kwargs)

    monkeypatch.setattr(positions_module, "_ranges", no_internals)  # every marked generation ends there
    monkeypatch.setattr(positions_module, "MetadataWrapper", wrapper)
    assert [(d.line, d.column, d.end_line, d.end_column) for d in lint_source(src, "t.py")] == fast == [(5, 5, 5, 21)]
    assert used  # the answer came from libcst's provider


# Runs each pattern it is sent over each text, naming the pattern (on stdout) before running it.
RUN_PATTERNS = (
    "import pickle, sys\n"
    "patterns, texts = pickle.load(sys.stdin.buffer)\n"
    "for p in patterns:\n"
    "    print(repr(p.pattern), flush=True)\n"
    "    for text in texts:\n"
    "        p.findall(text + '\\n' + text)\n"
    "print('done')\n"
)


def test_text_patterns_are_linear_on_hostile_text():
    """The prefilter and pruning patterns run on every file: none may backtrack exponentially (a banner comment
    of '#' after a comma, for one). On these inputs an exponential pattern would run for years, a linear one for
    milliseconds: every pattern finishes, in a subprocess whose timeout is only a hang guard."""
    import pickle
    import subprocess
    import sys

    from torchlint.analysis import prune

    required = [q for r in ALL_RULES for p in r.requires for q in (p if isinstance(p, tuple) else (p,))]
    # a test of a rule's own (tl003's AppendedListCopied) is built from patterns (`parts`): those are checked
    patterns = {q for p in required for q in ((p,) if isinstance(p, re.Pattern) else p.parts)}
    patterns |= {q for r in ALL_RULES for c in r.scope_conditions() for q in c}
    patterns |= {prune._DEFINES, prune._DEF_LINE, prune._WORD}
    patterns |= {b for p in list(patterns) for b in branches(p)}  # as prune and the prefilter search them
    hostile = ["#" * 5000, "# " * 5000, ", " * 2000 + "#" * 3000, "." * 5000, "a" * 5000 + "(", "self . " * 2000,
               "x.data " * 2000, "\t" * 5000 + "def", "schedule" * 1000, ", #" * 2000 + "\n" * 10 + "True"]
    order = sorted(patterns, key=lambda p: (p.pattern, p.flags))
    try:
        r = subprocess.run([sys.executable, "-c", RUN_PATTERNS], input=pickle.dumps((order, hostile)),
                           capture_output=True, timeout=300)
    except subprocess.TimeoutExpired as exc:
        started = (exc.stdout or b"").decode().splitlines()
        pytest.fail(f"a pattern did not finish on hostile text: {started[-1] if started else '(none started)'}")
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().splitlines() == [repr(p.pattern) for p in order] + ["done"]


def test_marked_code_generation_gives_libcst_positions():
    """Every node's range from the marking code generation equals libcst's PositionProvider's, on the fixtures,
    the rule examples and odd layouts (CRLF, lone CR, tabs, continuation lines, decorators, comments)."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    from torchlint.source.walk import walk

    odd = [
        "@dec(\n    1)\nclass A(B):  # c\n\n    # lead\n    def f(self, x,\n          y):\n        return (x +\n  y)\n",
        "x = 1\r\nif x:\r\n    y = [a,\r\n         b]\r\nelse:\r\n    pass\r\n",
        "a = 1\rb = (2,\r 3)\r",
        "def g():\n\tfor i in range(3):\n\t\ttotal = total + \\\n\t\t\tloss\n\t\ttotal.backward()\n",
        "s = '''multi\nline''' ; t = f'{s!r:>10}'\n",
    ]
    sources = [src for _, src in positive_sources()] + odd
    for src in sources:
        module = cst.parse_module(src)
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        state = positions_module._MarkingCodegenState(default_indent=module.default_indent,
                                                      default_newline=module.default_newline)
        module._codegen(state)
        got, code = positions_module._ranges(state, None), "".join(state.tokens)
        assert code == module.code
        nodes = list(walk(module, descend_scopes=True))
        assert len(nodes) > 3
        for node in nodes:
            assert got[id(node)] == expected[node], (src, type(node).__name__)


def test_fix_edits_computed_around_the_node_equal_whole_file_edits():
    """The edits of a fix (`--format json`/`sarif`) are computed on the top-level statements it touches, not by
    fixing and diffing the whole file; they are the very edits the whole-file diff gives, on every fixture and
    positive example, and on files with a header comment, CRLF, lone CR, a BOM and no final newline."""
    from torchlint.pipeline.analyze import analyze
    from torchlint.pipeline.apply import LocalEdits, apply_fixes, edits

    base = "import torch\n\nfor x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n    optimizer.step()\n"
    odd = [base.replace("\n", "\r\n"), base.replace("\n", "\r"), "# header\n\n" + base, base.rstrip("\n"), "\ufeff" + base]
    compared = 0
    for _, src in list(positive_sources()) + [("TL004", s) for s in odd]:
        analysis = analyze(src, "t.py", ALL_RULES)
        local = LocalEdits(analysis.module)
        for _, finding in analysis.findings:
            if finding.fix is None:
                continue
            whole = edits(analysis.module.code, apply_fixes(analysis.module, [finding.fix]).code)
            assert local.edits(finding.fix) == whole
            compared += 1
    assert compared > 100


def test_edits_from_the_pruned_text_equal_edits_from_the_whole_text():
    """`--format json` prunes like the text format: blanked functions keep their lines, and a fix's edits come
    from the statement it touches, so they are the same as from the whole text."""
    from tests.test_consistency import _big_file
    from torchlint.engine import _diagnostics
    from torchlint.pipeline.analyze import analyze

    sources = [src for _, src in positive_sources()] + [_big_file(every=200)]
    for src in sources:
        pruned = lint_source(src, "t.py", with_edits=True)
        whole = _diagnostics(analyze(src, "t.py", ALL_RULES, whole=True), src, "t.py", with_edits=True)
        assert pruned == whole


def test_fixes_applied_on_their_statements_equal_fixes_applied_to_the_whole_module(monkeypatch):
    """`fix_source` applies and checks each fix on the top-level statements it touches; the text it writes is the
    text that applying the fixes to the whole module writes, over every rule's positive sources, a long file with
    fixes in many functions, two fixes in one function, and a file without a final line break."""
    from torchlint.engine import fix_source
    from torchlint.pipeline.apply import LocalEdits

    two_in_one = ("def train(model, loader, optimizer, crit):\n    total = 0\n    for x, y in loader:\n"
                  "        loss = crit(model(x), y)\n        loss.backward()\n        optimizer.step()\n"
                  "        total += loss\n    return total\n")
    helper = "# a helper\ndef helper_{0}(a, b):\n    return a * {0} + b\n\n\n"
    functions = (helper.format(i) + two_in_one.replace("train", f"train_{i}") + "\n\n" for i in range(12))
    many = "import torch\n\n\n" + "".join(functions)
    sources = [src for _, src in positive_sources()] + [many, two_in_one, two_in_one.rstrip("\n")]
    local = [fix_source(src, "t.py", unsafe=True) for src in sources]
    assert sum(r.applied for r in local) > 100
    monkeypatch.setattr(LocalEdits, "apply", lambda self, text, fixes: None)
    monkeypatch.setattr(LocalEdits, "region", lambda self, fix: None)
    for src, got in zip(sources, local):
        whole = fix_source(src, "t.py", unsafe=True)
        assert (got.text, got.applied) == (whole.text, whole.applied)


def test_positions_of_identical_decorated_statements():
    """A statement whose text occurs twice is placed from the lines `ast` gives; a decorated one starts, for
    libcst, at `def`, not a line higher at its first decorator."""
    fn = ("@decorate\ndef train(model, loader, optimizer, criterion):\n    for x, y in loader:\n"
          "        loss = criterion(model(x), y)\n        loss.backward()\n        optimizer.step()\n")
    src = "import torch\n\n\n" + fn + "\n\n" + fn
    got = [(d.line, d.column, d.end_line, d.end_column, d.code) for d in lint_source(src, "t.py")]
    assert got == [(9, 9, 9, 25, "TL004"), (17, 9, 17, 25, "TL004")]


def test_positions_read_the_file_a_bounded_number_of_times(monkeypatch):
    """Placing the statements of many findings reads the file's text a bounded number of times in all, not once
    per statement (searching it for each statement's code and counting its line breaks from the start would be
    quadratic in a long file with many findings)."""
    import libcst as cst

    from torchlint.source.walk import walk

    scanned = {"chars": 0}

    class CountingText(str):
        def find(self, sub, start=0, *rest):
            at = str.find(self, sub, start, *rest)
            scanned["chars"] += (len(self) if at < 0 else at + len(sub)) - start
            return at

    from torchlint.source.lines import breaks_before as counted_breaks

    def breaks_before(text, offset):
        scanned["chars"] += offset
        return counted_breaks(text, offset)

    block = "for x, y in loader_{i}:\n    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"
    text = "".join(block.format(i=i) for i in range(300))
    module = cst.parse_module(text)
    tops = {id(n): i for i, stmt in enumerate(module.body) for n in walk(stmt, descend_scopes=True)}
    nodes = [stmt.body.body[-1] for stmt in module.body]  # one node in each statement: 300 holders
    monkeypatch.setattr(positions_module, "breaks_before", breaks_before, raising=False)
    where = positions_module.positions(module, CountingText(text), nodes, tops)
    assert [where[n].start.line for n in nodes] == [4 * i + 4 for i in range(300)]
    assert scanned["chars"] <= 2 * len(text), scanned


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_fix_keeps_a_form_feed_before_a_statement_it_does_not_touch(newline):
    """libcst drops a form feed at the start of a statement when it writes the code again: a safe --fix removed
    the page breaks of statements far from the one it fixed."""
    from torchlint.engine import fix_source
    from torchlint.pipeline.prefilter import select_rules

    lines = ["import torch", "", "\x0crunning = 0.0", "for x, y in loader:", "    loss = crit(model(x), y)",
             "    optimizer.zero_grad()", "    loss.backward()", "    optimizer.step()", "    running += loss",
             "\x0cprint(running)", ""]
    text = newline.join(lines)
    result = fix_source(text, "t.py", select_rules(["TL007"]))
    assert result.applied == 1
    assert result.text == text.replace("running += loss", "running += loss.item()")
