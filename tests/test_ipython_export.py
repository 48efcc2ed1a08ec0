
"""A `.py` exported from a notebook that keeps its IPython lines (`!pip install ...`): checked with those lines read
as no-ops, never fixed, and a TL901 notice saying so; other syntax errors still stop the check."""

import textwrap

from torchlint.engine import fix_source, lint_source
from torchlint.source.ipython import mask_ipython_lines

EXPORT = textwrap.dedent("""\
    # -*- coding: utf-8 -*-
    !pip install tqdm
    import torch
    %matplotlib inline
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
    """)


def test_an_export_with_ipython_lines_is_checked():
    diags = lint_source(EXPORT, "train.py")
    assert [(d.code, d.line, d.column) for d in diags] == [("TL901", 2, 1), ("TL004", 10, 5)]
    assert "lines 2, 4" in diags[0].message and "no fix is applied" in diags[0].message


def test_an_export_with_ipython_lines_is_never_fixed():
    result = fix_source(EXPORT, "train.py", unsafe=True)
    assert result.text == EXPORT and result.applied == 0
    assert [d.code for d in result.remaining] == ["TL901", "TL004"]


def test_an_export_with_another_syntax_error_is_not_checked():
    broken = EXPORT.replace("for x, y in loader:", "for x, y in loader")
    diags = lint_source(broken, "train.py")
    assert [d.code for d in diags] == ["TL901"] and "not checked" in diags[0].message


def test_masking_keeps_lines_and_indents_and_follows_continuations():
    text = "if ok:\n    !pip install a \\\n      b\n    x = (1,\n!not_magic)\nprint('!x')\n"
    masked, lines = mask_ipython_lines(text)
    assert lines == [2, 3]
    assert masked.splitlines() == ["if ok:", "    pass", "    pass", "    x = (1,", "!not_magic)", "print('!x')"]


def test_plain_python_has_nothing_to_mask():
    assert mask_ipython_lines("import torch\nx = 1  # !pip\n") is None
