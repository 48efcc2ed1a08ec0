"""Correct training code in the styles people actually write (PyTorch examples, Hugging Face, Accelerate,
Lightning, DeepSpeed, AMP, LBFGS, RL, DCGAN, truncated BPTT) must produce no finding at all."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from torchlint.engine import lint_source

CORRECT = sorted((ROOT / "tests" / "corpus" / "correct").glob("*.py"))


@pytest.mark.parametrize("path", CORRECT, ids=[p.stem for p in CORRECT])
def test_correct_code_is_silent(path):
    diags = lint_source(path.read_text(encoding="utf-8"), path.name)
    assert [f"{d.line}:{d.column} {d.code} {d.message}" for d in diags] == []
