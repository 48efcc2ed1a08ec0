"""Property test of notebooks: for generated cells (characters that str.splitlines takes for line breaks inside
strings, a form feed before a statement, CRLF cells, empty cells, line and cell magics, sources stored as lists or
as one string, a notebook checked out with CRLF), findings land on their cell and line, and `--fix` and
`--add-noqa` change exactly the lines they mean to: the whole file is compared with the one expected."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchlint.notebook import add_noqa_notebook, fix_notebook, lint_notebook
from torchlint.pipeline.prefilter import select_rules

RULES = select_rules(["TL004", "TL007"])
# Where str.splitlines splits and Python does not (a lone "\r" ends a line for Python too: not one of them).
SEPARATORS = ["\u2028", "\u2029", "\x0c", "\x0b", "\x85", "\x1c", "\x1d", "\x1e"]


def _accumulating(n: int) -> tuple[list[str], dict[int, tuple[str, str]]]:
    """A loop whose `running += loss` is TL007 (a safe fix): its lines, and {line index: (code, fixed line)}."""
    lines = [f"running{n} = 0.0", "for x, y in loader:", f"    loss{n} = crit(model(x), y)",
             f"    optimizer{n}.zero_grad()", f"    loss{n}.backward()", f"    optimizer{n}.step()",
             f"    running{n} += loss{n}", f"print(running{n})"]
    return lines, {6: ("TL007", f"    running{n} += loss{n}.item()")}


def _never_zeroed(n: int) -> tuple[list[str], dict[int, tuple[str, str]]]:
    """A loop whose step is TL004 (an unsafe fix: not applied by a safe --fix)."""
    lines = ["for x, y in loader:", f"    out{n} = crit(model(x), y)", f"    out{n}.backward()", f"    opt{n}.step()"]
    return lines, {3: ("TL004", lines[3])}


@st.composite
def fillers(draw) -> str:
    kind = draw(st.sampled_from(["string", "string", "feed", "magic", "shell", "assign", "help", "blank", "comment"]))
    if kind == "string":
        return f"label = 'a{draw(st.sampled_from(SEPARATORS))}b'"
    return {"feed": "\x0cimport torch", "magic": "%matplotlib inline", "shell": "!pip install -q torch",
            "assign": "files = !ls", "help": "model?", "blank": "", "comment": "# noqa: E501 is not said here"}[kind]


@st.composite
def cells(draw, number: int) -> dict:
    """A cell: its lines, the findings and fixed lines by line index, its newline and how it is stored."""
    lines: list[str] = []
    marks: dict[int, tuple[str, str]] = {}
    for n in range(draw(st.integers(0, 2))):
        lines += draw(st.lists(fillers(), max_size=2))
        block, found = draw(st.sampled_from([_accumulating, _never_zeroed]))(number * 10 + n)
        marks.update({len(lines) + i: v for i, v in found.items()})
        lines += block
    lines += draw(st.lists(fillers(), max_size=2))
    cell_magic = draw(st.integers(0, 5)) == 0
    if cell_magic:  # %%time: the whole cell is not Python to torchlint; nothing in it is reported or changed
        lines, marks = ["%%time", *lines], {}
    return {"lines": lines, "marks": marks, "newline": draw(st.sampled_from(["\n", "\r\n"])),
            "as_list": draw(st.booleans()), "final": draw(st.booleans())}


def _source(cell: dict, lines: list[str]):
    text = cell["newline"].join(lines) + (cell["newline"] if cell["final"] and lines else "")
    return text.splitlines(keepends=True) if cell["as_list"] else text  # nbformat's own layout of a list


def _notebook(generated: list[dict], crlf: bool, lines_of) -> str:
    nb = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    for cell in generated:
        nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "notes\u2028more"})
        nb["cells"].append({"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                            "source": _source(cell, lines_of(cell))})
    text = json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    return text.replace("\n", "\r\n") if crlf else text


def _fixed(cell: dict) -> list[str]:
    return [cell["marks"][i][1] if cell["marks"].get(i, ("",))[0] == "TL007" else line
            for i, line in enumerate(cell["lines"])]


def _accepted(cell: dict) -> list[str]:
    return [f"{line}  # noqa: {cell['marks'][i][0]}" if i in cell["marks"] else line
            for i, line in enumerate(cell["lines"])]


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.integers(1, 3).flatmap(lambda k: st.tuples(*[cells(i) for i in range(k)])), st.booleans())
def test_findings_fix_and_noqa_touch_exactly_their_lines(generated, crlf):
    generated = list(generated)
    text = _notebook(generated, crlf, lambda c: c["lines"])
    expected = {(2 * i + 2, line + 1, code) for i, c in enumerate(generated) for line, (code, _) in c["marks"].items()}
    found = lint_notebook(text, "nb.ipynb", RULES)
    assert {(d.cell, d.line, d.code) for d in found} == expected, [(d.cell, d.line, d.code, d.message) for d in found]

    fixed = fix_notebook(text, "nb.ipynb", RULES, unsafe=False)
    assert fixed.text == _notebook(generated, crlf, _fixed)
    assert fixed.applied == sum(code == "TL007" for c in generated for code, _ in c["marks"].values())
    assert {(d.cell, d.line, d.code) for d in fixed.diags} == {e for e in expected if e[2] == "TL004"}

    accepted, changed = add_noqa_notebook(text, "nb.ipynb", RULES)
    assert changed == len(expected)
    assert accepted == (_notebook(generated, crlf, _accepted) if expected else text)
    assert lint_notebook(accepted, "nb.ipynb", RULES) == []
