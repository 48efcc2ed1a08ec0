"""Definitions a notebook never runs (analysis.liveness): no rule reports inside a top-level function or class that
nothing the notebook runs reaches; a `.py` file, which other code may import, is checked whole."""

from __future__ import annotations

import json

import pytest

from torchlint.engine import lint_source
from torchlint.notebook import lint_notebook
from torchlint.rules import ALL_RULES

DEFS = [
    "import torch\n",
    "def train_epoch(model, loader, optimizer, criterion):\n"
    "    for x, y in loader:\n"
    "        loss = criterion(model(x), y)\n"
    "        loss.backward()\n"
    "        optimizer.step()\n",
    "def train_model(model, loader, optimizer, criterion, epochs):\n"
    "    for _ in range(epochs):\n"
    "        train_epoch(model, loader, optimizer, criterion)\n",
]
AGENT = [
    "import torch\n",
    "class Agent:\n"
    "    def __init__(self, net):\n"
    "        self.net = net\n"
    "        self.opt = torch.optim.Adam(net.parameters())\n"
    "    def learn(self, batches):\n"
    "        for x in batches:\n"
    "            self.net(x).mean().backward()\n"
    "            self.opt.step()\n",
]


def _notebook(cells: list[str]) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                                  "source": c} for c in cells],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _codes(cells: list[str]) -> list[tuple[int | None, int, str]]:
    return [(d.cell, d.line, d.code) for d in lint_notebook(_notebook(cells), "train.ipynb", ALL_RULES)
            if d.code.startswith("TL0")]


def test_a_function_reached_only_from_a_function_no_cell_calls_never_runs():
    assert _codes(DEFS) == []
    assert _codes([*AGENT]) == []  # a class never instantiated


@pytest.mark.parametrize("run", [
    "train_model(net, loader, opt, crit, 3)\n",                          # a cell calls it
    "if __name__ == '__main__':\n    train_model(net, loader, opt, crit, 3)\n",
    "trainer = Trainer(on_epoch=train_model)\n",                         # handed on by name
    "for f in [train_epoch]:\n    f(net, loader, opt, crit)\n",
    "exec('train_model(net, loader, opt, crit, 3)')\n",                  # run by text: every definition counts
])
def test_a_definition_a_cell_reaches_is_checked(run):
    assert _codes([*DEFS, run]) == [(2, 5, "TL004")]


def test_an_instantiated_class_is_checked():
    assert _codes([*AGENT, "agent = Agent(net)\nagent.learn(data)\n"]) == [(2, 8, "TL004")]


def test_a_py_file_is_checked_whole():
    """A module may be imported by code the analysis does not see: its functions are checked, called or not."""
    assert [(d.line, d.code) for d in lint_source("".join(DEFS), "train.py")] == [(6, "TL004")]
