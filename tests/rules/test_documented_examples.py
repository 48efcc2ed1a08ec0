"""Each rule's documentation is linted: the code of its Example section gets a finding of that rule on every line
marked `# TLnnn`, and the code of its Correct look-alikes section gets none.

The code blocks are the fenced ```python blocks of the rule's `doc`, grouped by the `##` heading they sit under.
"""

from __future__ import annotations

import re
import textwrap

import pytest

from torchlint.engine import lint_source
from torchlint.rules import ALL_RULES, Rule

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")


def python_blocks(doc: str) -> dict[str, list[str]]:
    """The fenced python blocks of a Markdown text, by the text of the heading above them (dedented code)."""
    sections: dict[str, list[str]] = {}
    heading = ""
    fence: str | None = None
    language = ""
    lines: list[str] = []
    for line in textwrap.dedent(doc).splitlines():
        if fence is None:
            if match := FENCE.match(line):
                fence, language, lines = match.group(1), match.group(2).lower(), []
            elif match := HEADING.match(line):
                heading = match.group(2)
        elif line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            if language in ("python", "py"):
                sections.setdefault(heading, []).append(textwrap.dedent("\n".join(lines)) + "\n")
            fence = None
        else:
            lines.append(line)
    assert fence is None, "a fenced block is not closed"
    return sections


def blocks_under(rule: type[Rule], prefix: str) -> list[str]:
    """The python blocks of the sections whose heading starts with `prefix` (case-insensitive)."""
    return [block for heading, blocks in python_blocks(rule.doc).items()
            if heading.lower().startswith(prefix) for block in blocks]


def lines_of(rule: type[Rule], code: str) -> list[int]:
    """The lines of `rule`'s findings in `code`, linted with every rule as a user's file is; the code must parse."""
    diagnostics = lint_source(code, "example.py")
    assert not [d for d in diagnostics if d.code.startswith("TL9")], [d.message for d in diagnostics]
    return sorted(d.line for d in diagnostics if d.code == rule.code)


def marked_lines(rule: type[Rule], code: str) -> list[int]:
    """The lines whose comment names the rule (`# TL004`, `# TL010: clip before unscale_`)."""
    mark = re.compile(rf"#\s*{rule.code}\b")
    return [number for number, line in enumerate(code.splitlines(), 1) if mark.search(line)]


def test_the_markdown_reader_groups_blocks_by_heading():
    doc = """
    ## Example
    ```python
    a = 1
    ```
    Text, then a block in another language and an indented block, neither read.
    ```text
    b = 2
    ```

        c = 3

    ## Correct look-alikes (not flagged)
    ```python
    if x:
        d = 4
    ```
    ```python
    e = 5
    ```
    """
    assert python_blocks(doc) == {"Example": ["a = 1\n"],
                                  "Correct look-alikes (not flagged)": ["if x:\n    d = 4\n", "e = 5\n"]}


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.code)
def test_the_example_is_flagged_on_its_marked_lines(rule):
    examples = blocks_under(rule, "example")
    assert examples, f"{rule.code}: the Example section has no python block"
    for code in examples:
        found = lines_of(rule, code)
        assert found, f"{rule.code}: its documented Example gives no {rule.code} finding:\n{code}"
        marked = marked_lines(rule, code)
        assert not marked or sorted(set(found)) == marked, (
            f"{rule.code}: findings on lines {found}, the Example marks lines {marked}:\n{code}")


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.code)
def test_the_correct_look_alikes_section_has_code(rule):
    """A look-alike described only in prose cannot be linted: the section shows at least one as a python block."""
    assert blocks_under(rule, "correct"), f"{rule.code}: the Correct look-alikes section has no python block"


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.code)
def test_the_correct_look_alikes_are_not_flagged(rule):
    for code in blocks_under(rule, "correct"):
        assert lines_of(rule, code) == [], f"{rule.code}: a documented look-alike is flagged:\n{code}"
