"""Jupyter notebooks through the real command: positions by cell, magics, write-back of fixed cells only."""

from __future__ import annotations

import json

import pytest

SETUP = ["%matplotlib inline\n", "!pip install -q torch\n", "import torch\n",
         "model = torch.nn.Linear(2, 1)\n", "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)"]
TRAIN = ["for x, y in loader:\n", "    loss = criterion(model(x), y)\n", "    loss.backward()\n",
         "    x_help?\n", "    optimizer.step()"]


def notebook(cells, **style):
    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Training notes\n", "Some text."]},
            {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": cells[0],
             "outputs": [{"name": "stdout", "output_type": "stream", "text": ["héllo\n"]}]},
            {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": [],
             "source": ["%%time\n", "for x in loader:\n", "    loss.backward()\n", "    optimizer.step()"]},
            {"cell_type": "code", "execution_count": 3, "metadata": {"tags": ["train"]}, "outputs": [], "source": cells[1]},
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    settings = {"indent": 1, "sort_keys": True, "ensure_ascii": False}
    settings.update(style)
    return json.dumps(nb, **settings) + "\n"


@pytest.fixture
def nb_path(tmp_path):
    path = tmp_path / "train.ipynb"
    path.write_text(notebook([SETUP, TRAIN]), encoding="utf-8")
    return path


def test_reports_cell_and_line(nb_path, run_cli):
    r = run_cli("-q", "train.ipynb", cwd=nb_path.parent)
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        "train.ipynb:cell 4:5:5: TL004 [unsafe fix] `optimizer.step()` runs in a loop that never clears "
        "`optimizer`'s gradients: backward() adds into .grad, so each step applies the sum of all earlier "
        "gradients; call `optimizer.zero_grad()`"
    ]
    item = json.loads(run_cli("--format", "json", "train.ipynb", cwd=nb_path.parent).stdout)[0]
    assert (item["cell"], item["line"], item["column"], item["code"]) == (4, 5, 5, "TL004")


def test_cell_magic_cells_are_skipped(tmp_path, run_cli):
    path = tmp_path / "ok.ipynb"
    fixed_train = TRAIN + ["\n", "    optimizer.zero_grad()"]
    fixed_train[-3] = "    optimizer.step()"
    path.write_text(notebook([SETUP, fixed_train]), encoding="utf-8")
    r = run_cli("-q", "ok.ipynb", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "")  # the %%time cell's missing zero_grad is not Python to us


def test_fix_rewrites_only_the_fixed_cell(nb_path, run_cli):
    before = nb_path.read_text(encoding="utf-8")
    r = run_cli("--fix", "--unsafe-fixes", "train.ipynb", cwd=nb_path.parent)
    assert r.returncode == 0, r.stdout
    after = nb_path.read_text(encoding="utf-8")
    old, new = json.loads(before), json.loads(after)
    assert new["cells"][3]["source"] == TRAIN[:-1] + ["    optimizer.step()\n", "    optimizer.zero_grad()"]
    assert new["cells"][:3] == old["cells"][:3] and new["metadata"] == old["metadata"]
    assert new["cells"][3]["metadata"] == {"tags": ["train"]}
    # Byte for byte outside the fixed cell's source: only the lines of that cell changed.
    changed = [line for line in after.splitlines() if line not in before.splitlines()]
    assert changed == ['    "    optimizer.step()\\n",', '    "    optimizer.zero_grad()"']
    assert "héllo" in after  # non-ASCII kept as it was written
    assert run_cli("--fix", "--unsafe-fixes", "train.ipynb", cwd=nb_path.parent).returncode == 0
    assert nb_path.read_text(encoding="utf-8") == after  # idempotent


def test_magics_survive_a_fix(tmp_path, run_cli):
    cells = [SETUP, ["!nvidia-smi\n"] + TRAIN]
    path = tmp_path / "m.ipynb"
    path.write_text(notebook(cells), encoding="utf-8")
    run_cli("--fix", "--unsafe-fixes", "m.ipynb", cwd=tmp_path)
    source = json.loads(path.read_text(encoding="utf-8"))["cells"][3]["source"]
    assert source[0] == "!nvidia-smi\n" and source[4] == "    x_help?\n"
    assert source[-1] == "    optimizer.zero_grad()"


def test_unknown_json_style_is_never_rewritten(tmp_path, run_cli):
    path = tmp_path / "odd.ipynb"
    path.write_text(notebook([SETUP, TRAIN], indent=3), encoding="utf-8")
    before = path.read_text(encoding="utf-8")
    r = run_cli("--fix", "--unsafe-fixes", "-q", "odd.ipynb", cwd=tmp_path)
    assert path.read_text(encoding="utf-8") == before
    assert r.returncode == 1
    assert "odd.ipynb:1:1: TL900 notebook not rewritten: its JSON formatting could not be reproduced" in r.stdout
    assert "odd.ipynb:cell 4:5:5: TL004" in r.stdout


def test_diff_on_notebook(nb_path, run_cli):
    r = run_cli("--diff", "--unsafe-fixes", "train.ipynb", cwd=nb_path.parent)
    assert r.returncode == 1
    assert '+    "    optimizer.zero_grad()"' in r.stdout


def test_invalid_notebook(tmp_path, run_cli):
    (tmp_path / "broken.ipynb").write_text('{"cells": [', encoding="utf-8")
    r = run_cli("-q", "broken.ipynb", cwd=tmp_path)
    assert r.returncode == 1 and r.stdout.startswith("broken.ipynb:1:1: TL900 not a valid notebook (JSON error:")


def test_directories_include_notebooks(nb_path, run_cli):
    r = run_cli("-q", ".", cwd=nb_path.parent)
    assert r.stdout.startswith("train.ipynb:cell 4:5:5: TL004")


def test_shell_command_continued_with_backslashes_is_not_a_syntax_error(tmp_path, run_cli):
    """A `!` command continued over several lines with trailing backslashes is valid IPython: no TL901
    'unexpected indent', the notebook is checked, and a fix keeps the command."""
    shell = ["! python preprocess.py --data_dir data \\\n", "                    --max_len 510\n", "\n"]
    path = tmp_path / "shell.ipynb"
    path.write_text(notebook([SETUP, shell + TRAIN]), encoding="utf-8")
    r = run_cli("-q", "--format", "json", "shell.ipynb", cwd=tmp_path)
    assert [(d["code"], d["cell"], d["line"]) for d in json.loads(r.stdout)] == [("TL004", 4, 8)]
    run_cli("--fix", "--unsafe-fixes", "shell.ipynb", cwd=tmp_path)
    source = json.loads(path.read_text(encoding="utf-8"))["cells"][3]["source"]
    assert source[:2] == shell[:2] and source[-1] == "    optimizer.zero_grad()"


def test_percent_formatting_on_a_continuation_line_is_not_a_magic(tmp_path, run_cli):
    """`print("..."` then `      % (a, b))` on the next line is Python, not a line magic (taking it for one would
    leave an unclosed bracket: TL901); a `%` line inside a string is no magic either."""
    cell = ['print("epoch %d, loss %.4f"\n', "      % (1, 0.5))\n", 's = """\n', "%not a magic inside a string\n",
            '"""\n']
    path = tmp_path / "fmt.ipynb"
    path.write_text(notebook([SETUP + ["\n"] + cell, TRAIN]), encoding="utf-8")
    r = run_cli("-q", "--format", "json", "fmt.ipynb", cwd=tmp_path)
    assert [d["code"] for d in json.loads(r.stdout)] == ["TL004"]


def test_an_unfinished_cell_is_reported_and_the_others_checked(tmp_path, run_cli):
    """An exercise notebook's cell like `model = ` gets TL901 at its own line, and the other cells are checked."""
    unfinished = ["# TODO: build the network\n", "model = \n"]
    path = tmp_path / "exercise.ipynb"
    path.write_text(notebook([unfinished, TRAIN]), encoding="utf-8")
    items = json.loads(run_cli("--format", "json", "exercise.ipynb", cwd=tmp_path).stdout)
    assert [(d["code"], d["cell"], d["line"]) for d in items] == [("TL901", 2, 2), ("TL004", 4, 5)]
    assert items[0]["message"] == "syntax error: invalid syntax; cell not checked"
    before = path.read_bytes()
    run_cli("--fix", "--unsafe-fixes", "exercise.ipynb", cwd=tmp_path)
    assert path.read_bytes() == before  # a notebook that does not parse is never rewritten


def _train_with_text_before(first: str) -> list[str]:
    return [first, *TRAIN]


@pytest.mark.parametrize("separator", ["\u2028", "\x0c", "\x85", "\x1c", "\u2029", "\x0b"])
def test_a_line_separator_inside_a_string_is_not_a_line(tmp_path, run_cli, separator):
    """str.splitlines splits at U+2028, form feeds, U+0085...; Python does not: the finding was reported one line
    low, and a safe --fix turned the character inside the string into a line break (changing the data)."""
    cell = _train_with_text_before(f"label = 'a{separator}b'\n")
    path = tmp_path / "sep.ipynb"
    path.write_text(notebook([SETUP, cell]), encoding="utf-8")
    items = json.loads(run_cli("--format", "json", "sep.ipynb", cwd=tmp_path).stdout)
    assert [(d["code"], d["cell"], d["line"]) for d in items] == [("TL004", 4, 6)]
    run_cli("--fix", "--unsafe-fixes", "sep.ipynb", cwd=tmp_path)
    source = json.loads(path.read_text(encoding="utf-8"))["cells"][3]["source"]
    assert "".join(source) == "".join(cell[:-1]) + "    optimizer.step()\n    optimizer.zero_grad()"


def test_a_crlf_cell_stays_crlf_after_a_fix(tmp_path, run_cli):
    cell = [line.replace("\n", "\r\n") for line in TRAIN]
    path = tmp_path / "crlf.ipynb"
    path.write_text(notebook([SETUP, cell]), encoding="utf-8")
    r = run_cli("--fix", "--unsafe-fixes", "crlf.ipynb", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    source = json.loads(path.read_text(encoding="utf-8"))["cells"][3]["source"]
    assert "".join(source) == "".join(cell[:-1]) + "    optimizer.step()\r\n    optimizer.zero_grad()"


@pytest.mark.parametrize("cells, why", [
    ([None], "cell 1 is not a JSON object"),
    ([{"cell_type": "code", "source": ["x = 1\n", 2]}], "cell 1's source is not text"),
    ([{"cell_type": "code", "source": None}], "cell 1's source is not text"),
    ([{"cell_type": "code", "source": {"a": 1}}], "cell 1's source is not text"),
])
def test_a_malformed_cell_is_one_tl900_and_the_run_goes_on(tmp_path, run_cli, cells, why):
    """A `null` cell or a number among a cell's source lines crashed the whole run with a traceback."""
    (tmp_path / "bad.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4}), encoding="utf-8")
    (tmp_path / "good.ipynb").write_text(notebook([SETUP, TRAIN]), encoding="utf-8")
    for mode in ((), ("--fix", "--unsafe-fixes"), ("--diff",), ("--add-noqa",)):
        r = run_cli("-q", "--no-cache", *mode, "bad.ipynb", "good.ipynb", cwd=tmp_path)
        assert "Traceback" not in r.stderr, (mode, r.stderr)
        if mode in ((), ("--fix", "--unsafe-fixes")):
            assert r.stdout.startswith(f"bad.ipynb:1:1: TL900 not a valid notebook ({why})"), (mode, r.stdout)
        if not mode:
            assert "good.ipynb:cell 4:5:5: TL004" in r.stdout


def test_help_lines_and_automagics_are_ipython_not_syntax_errors(tmp_path, run_cli):
    """IPython runs `?obj`, `??obj`, `obj?`, `%magic`, `!cmd`, `x = !cmd`, `y = %time f()` and, with automagic, a
    magic's name followed by its arguments (`cd data/My\\ Files`, `pip install x`): blanked, line numbers kept, the
    rest of the cell checked (TL004 at its own line)."""
    ipython = ["?torch.nn.Linear\n", "??torch.optim\n", "torch.nn.Linear?\n", "cd data/My\\ Files\n",
               "cd 'two words'\n", "pip install -q torchvision\n", "mkdir -p runs/exp1\n", "files = !ls\n",
               "took = %time sum(range(3))\n", "%load_ext autoreload\n", "\n"]
    path = tmp_path / "ipy.ipynb"
    path.write_text(notebook([SETUP, ipython + TRAIN]), encoding="utf-8")
    r = run_cli("-q", "--format", "json", "ipy.ipynb", cwd=tmp_path)
    assert [(d["code"], d["cell"], d["line"]) for d in json.loads(r.stdout)] == [("TL004", 4, 16)]
    run_cli("--fix", "--unsafe-fixes", "ipy.ipynb", cwd=tmp_path)
    source = json.loads(path.read_text(encoding="utf-8"))["cells"][3]["source"]
    assert source[: len(ipython)] == ipython  # the IPython lines are put back verbatim


@pytest.mark.parametrize("line, error", [
    ("cd = 3\n", None),  # a variable named like a magic: Python
    ("ls(x)\n", None),
    ('where = pwd + "/x"\n', None),
    ("pwd\n", None),
    ("time (1 +\n", "TL901"),  # continues on the next line: Python, and here an unclosed bracket
    ("cd ==\n", "TL901"),  # an operator after the name: Python (IPython's check), and broken
    ("print 'hello'\n", "TL901"),  # not a magic: a genuine syntax error
    ("model = \n", "TL901"),
])
def test_magic_names_in_python_and_genuine_syntax_errors(tmp_path, run_cli, line, error):
    """A line starting with a magic's name is taken for an automagic only when it is not Python on its own and
    opens nothing the next line continues; a real syntax error is still reported at its line."""
    path = tmp_path / "names.ipynb"
    path.write_text(notebook([SETUP + ["\n", line], TRAIN]), encoding="utf-8")
    r = run_cli("-q", "--format", "json", "names.ipynb", cwd=tmp_path)
    found = [(d["code"], d["cell"]) for d in json.loads(r.stdout)]
    assert found == ([(error, 2)] if error else []) + [("TL004", 4)]


def test_a_cell_whose_first_line_is_indented_runs_dedented(tmp_path, run_cli):
    """IPython strips the first line's indent from every line that starts with it (` def f():` in a cell is
    valid): checked at the cell's own columns, and a fix keeps the cell's indent."""
    train = [" for x, y in loader:\n", "     loss = criterion(model(x), y)\n", "     loss.backward()\n",
             "     optimizer.step()\n", "print('done')"]
    path = tmp_path / "indented.ipynb"
    path.write_text(notebook([SETUP, train]), encoding="utf-8")
    r = run_cli("-q", "--format", "json", "indented.ipynb", cwd=tmp_path)
    assert [(d["code"], d["cell"], d["line"], d["column"]) for d in json.loads(r.stdout)] == [("TL004", 4, 4, 6)]
    run_cli("--fix", "--unsafe-fixes", "indented.ipynb", cwd=tmp_path)
    source = json.loads(path.read_text(encoding="utf-8"))["cells"][3]["source"]
    assert source[:4] == train[:4] and source[4] == "     optimizer.zero_grad()\n" and source[5] == train[4]
    broken = [" x = (1,\n", " y = 2\n"]
    path.write_text(notebook([broken, TRAIN]), encoding="utf-8")
    r = run_cli("-q", "--format", "json", "indented.ipynb", cwd=tmp_path)
    found = [(d["code"], d["cell"], d["line"], d["column"]) for d in json.loads(r.stdout)]
    assert found == [("TL901", 2, 1, 6), ("TL004", 4, 5, 5)]  # still a syntax error, at the cell's column
