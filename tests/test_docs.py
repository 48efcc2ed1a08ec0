"""Rule pages are generated from the rule modules; they must be current, and complete."""

from __future__ import annotations

from torchlint.rule_docs import index, render
from torchlint.rules import ALL_RULES
from tests.conftest import ROOT

SECTIONS = ("## What it flags", "## Why it is wrong", "## Example", "## Fix", "## Correct look-alikes")


def test_pages_are_current():
    for rule in ALL_RULES:
        page = ROOT / "docs" / "rules" / f"{rule.code}.md"
        assert page.read_text(encoding="utf-8") == render(rule), "run: python -m torchlint.rule_docs docs/rules"
    assert (ROOT / "docs" / "rules" / "README.md").read_text(encoding="utf-8") == index()


def test_every_page_has_every_section():
    for rule in ALL_RULES:
        text = render(rule)
        for section in SECTIONS:
            assert section in text, (rule.code, section)


def test_readme_lists_every_rule():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for rule in ALL_RULES:
        assert rule.code in readme


def test_code_table_matches_the_registry():
    """torchlint.codes lists the codes without importing the rules; it must stay in step with them."""
    from torchlint.codes import RULE_CODES

    assert list(RULE_CODES) == [rule.code for rule in ALL_RULES]


def test_warm_path_does_not_import_libcst():
    """Reading results from the cache must not pay for libcst and the rules."""
    import subprocess
    import sys

    code = "import sys, torchlint.cli; print('libcst' in sys.modules, 'torchlint.rules' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
