"""The defaults of a script's argparse options (analysis.cmdline), as `args.name` reads them."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis.cmdline import Options
from torchlint.analysis.exprs import code_of

HEAD = """
import argparse
p = argparse.ArgumentParser()
p.add_argument("--num-epochs", default=3, type=int)
p.add_argument("-b", "--batch_size", type=int, default=64)
p.add_argument("--out", dest="out_dir", default="runs")
p.add_argument("--verbose", action="count", default=0)
p.add_argument("--seed", type=int)
p.add_argument("data", default="data/")
"""


def _default(src: str, read: str) -> str | None:
    src = textwrap.dedent(src)
    found = Options(cst.parse_module(src), src).default(cst.parse_expression(read))
    return None if found is None else code_of(found)


@pytest.mark.parametrize("read, expected", [
    ("cfg.num_epochs", "3"),  # the long option, `-` read as `_`
    ("cfg.batch_size", "64"),
    ("cfg.out_dir", '"runs"'),  # dest= names the attribute
    ("cfg.out", None),
    ("cfg.verbose", None),  # counted: grows with each use
    ("cfg.seed", None),  # no default written
    ("cfg.data", '"data/"'),  # a positional option
    ("args.num_epochs", None),  # not the name the parsed options are bound to
    ("cfg.num_epochs.real", None),
])
def test_default_of_an_option(read, expected):
    assert _default(HEAD + "cfg = p.parse_args()\n", read) == expected


def test_parsed_under_the_main_guard():
    assert _default(HEAD + "if __name__ == '__main__':\n    cfg = p.parse_args()\n", "cfg.batch_size") == "64"


@pytest.mark.parametrize("tail", [
    "cfg = p.parse_args()\ncfg.batch_size = 32\n",  # the script changes it
    "cfg = p.parse_args()\ncfg.batch_size *= 2\n",
    "cfg = p.parse_args()\nsetattr(cfg, 'batch_size', 32)\n",
    "cfg = p.parse_args()\ncfg = p.parse_args(['--batch_size', '8'])\n",  # bound twice
    "cfg = get_config()\n",  # not argparse's parse_args
    "p.add_argument('--batch_size', default=8)\ncfg = p.parse_args()\n",  # defined twice
])
def test_no_default_known(tail):
    assert _default(HEAD + tail, "cfg.batch_size") is None


def test_a_comparison_is_not_a_change():
    assert _default(HEAD + "cfg = p.parse_args()\nif cfg.batch_size == 1:\n    pass\n", "cfg.batch_size") == "64"
