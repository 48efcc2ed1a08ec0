"""The rule registry: a rule declares everything about itself on its class, and every part of torchlint that
needs to know a rule (the codes, configuration, the docs, `torchlint run`, `--fix --verify`) reads it from there."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import libcst as cst

from torchlint.diagnostic import Fix
from torchlint.rules import all_rules, registered, rule_by_code, rule_codes
from torchlint.rules.base import Finding, Rule
from torchlint.verify.signs import Sign

PACKAGE = Path(__file__).resolve().parents[2] / "torchlint"


class Throwaway(Rule):
    """A rule that exists only in this test: it reports every `0.5` and offers to write `0.25`."""

    code = "TL099"
    name = "throwaway"
    summary = "a rule that exists only in a test"
    fix_safety = "unsafe"
    requires = ()
    runtime_also = (Sign.GRAPH_GROWS,)  # (every sign has an owner already; this rule's bug shows it too)
    fix_promise = "the throwaway promise"
    doc = "\n## What it flags\nEvery `0.5`.\n"

    def check(self, model):
        from torchlint.source.walk import walk

        for node in walk(model.module, descend_scopes=True):
            if type(node) is cst.Float and node.value == "0.5":
                yield Finding(node, "half", Fix("unsafe", "write a quarter", ((node, cst.Float("0.25")),)))


def test_a_registered_rule_reaches_every_part_of_torchlint():
    from torchlint.config import Config, validate_codes
    from torchlint.engine import lint_source, select_rules
    from torchlint.fix_verify import _judge
    from torchlint.rule_docs import index, render
    from torchlint.run_command import combine

    assert "TL099" not in rule_codes()
    with registered(Throwaway):
        # the codes table and configuration
        assert rule_codes()[-1] == "TL099" and rule_by_code("TL099") is Throwaway
        assert "TL099" in Config().codes() and validate_codes(("TL099",), "select") == ("TL099",)
        # the engine
        [d] = lint_source("x = 0.5\n", "t.py", select_rules(["TL099"]))
        assert (d.code, d.line, d.column, d.message) == ("TL099", 1, 5, "half")
        # the docs
        assert "| [TL099](TL099.md) | `throwaway` |" in index() and render(Throwaway).startswith("# TL099 `throwaway`")
        # torchlint run: a sign the rule declares confirms its finding
        script = Path("t.py")
        record = attribute_of([(Sign.GRAPH_GROWS, 1)], script)
        [confirmed] = combine([d], record, script)
        assert confirmed.runtime == "confirmed"
        # --fix --verify: the fixed run without the rule's sign keeps the rule's promise
        run = {"steps": [{"optimizer": 0, "grads": [], "params": []}], "error": None, "observations": []}
        kept, detail = _judge("TL099", 1, "unsafe", run, run, {"steps": [], "observations": []})
        assert kept and detail.endswith("the throwaway promise")
    assert "TL099" not in rule_codes() and rule_by_code("TL099") is None


def attribute_of(signs: list[tuple[Sign, int]], script: Path) -> dict:
    from torchlint.rules import attribute

    where = str(script.resolve())
    return attribute({"steps": [], "error": None, "observations": [
        {"sign": s.value, "frames": [[where, line]], "message": "m", "step": 0} for s, line in signs]})


def test_every_sign_has_one_rule_that_owns_it():
    for sign in Sign:
        assert len([r for r in all_rules() if sign in r.runtime_signs]) == 1, sign


def test_each_rule_module_holds_the_rule_its_file_name_gives():
    for rule in all_rules():
        module = rule.__module__.rsplit(".", 1)[1]
        assert module.startswith(rule.code.lower() + "_"), (rule.code, module)


def test_no_rule_imports_another_rule():
    for path in sorted((PACKAGE / "rules").glob("tl*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not re.fullmatch(r"torchlint\.rules\.tl\d{3}_\w+", node.module), (path.name, node.module)


def _strings_outside_docstrings(path: Path) -> list[tuple[int, str]]:
    text = path.read_text(encoding="utf-8")
    docstrings = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                docstrings.add(first.lineno)
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.STRING and tok.start[0] not in docstrings:
            out.append((tok.start[0], tok.string))
    return out


def test_no_rule_code_is_spelled_outside_the_rules():
    """A rule's code is written in its own module only: the rest of torchlint asks the registry."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "rules") in path.parents:
            continue
        found += [f"{path.relative_to(PACKAGE)}:{line}: {s}" for line, s in _strings_outside_docstrings(path)
                  if re.search(r"TL0\d\d", s)]
    assert not found, found
