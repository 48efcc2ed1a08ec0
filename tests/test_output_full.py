"""`--format full` as golden output through the real command: a one-line finding, a finding over several lines, a
notebook finding (the cell's lines), with and without colour (NO_COLOR / FORCE_COLOR; none when not a terminal)."""

from __future__ import annotations

import os

from tests.test_notebook import SETUP, TRAIN, notebook
from torchlint.codes import PAGES

ONE = "for x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n    optimizer.step()\n"
MULTI = ("for x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward(\n        retain_graph=True)\n"
         "    optimizer.step()\n    optimizer.zero_grad()\n")
URL = PAGES.as_uri() + "/"  # the pages that ship with the package
TL004 = ("`optimizer.step()` runs in a loop that never clears `optimizer`'s gradients: backward() adds into .grad, so "
         "each step applies the sum of all earlier gradients; call `optimizer.zero_grad()`")

ONE_GOLDEN = f"""one.py:4:5: TL004 [unsafe fix] {TL004}
  |
4 |     optimizer.step()
  |     ^^^^^^^^^^^^^^^^ TL004
  |
  = help: insert `optimizer.zero_grad()` after the step (unsafe fix: --fix --unsafe-fixes)
  = rule: {URL}TL004.md

"""
MULTI_GOLDEN = f"""multi.py:3:5: TL002 [*] `loss.backward( retain_graph=True)` is the last backward of the iteration and keeps \
the graph (retain_graph=True): the saved activations stay alive into the next iteration's forward (twice the activation \
memory at its peak, more while anything holds the loss): drop it from the last backward
  |
3 |     loss.backward(
  |     ^^^^^^^^^^^^^^
4 |         retain_graph=True)
  |         ^^^^^^^^^^^^^^^^^^ TL002
  |
  = help: drop `retain_graph=True` from the last backward of the iteration (safe fix: --fix)
  = rule: {URL}TL002.md

"""
NOTEBOOK_GOLDEN = f"""train.ipynb:cell 4:5:5: TL004 [unsafe fix] {TL004}
  |
5 |     optimizer.step()
  |     ^^^^^^^^^^^^^^^^ TL004
  |
  = help: insert `optimizer.zero_grad()` after the step (unsafe fix: --fix --unsafe-fixes)
  = rule: {URL}TL004.md

"""
ONE_COLOR = (
    "\x1b[1mone.py:4:5:\x1b[0m \x1b[31m\x1b[1mTL004\x1b[0m [unsafe fix] " + TL004 + "\n"
    "\x1b[34m  |\x1b[0m\n"
    "\x1b[34m4 |\x1b[0m     optimizer.step()\n"
    "\x1b[34m  |\x1b[0m     \x1b[31m^^^^^^^^^^^^^^^^ TL004\x1b[0m\n"
    "\x1b[34m  |\x1b[0m\n"
    "  \x1b[36m= help:\x1b[0m insert `optimizer.zero_grad()` after the step (unsafe fix: --fix --unsafe-fixes)\n"
    f"  \x1b[36m= rule:\x1b[0m {URL}TL004.md\n"
    "\n"
)


def run_full(run_cli, tmp_path, *paths, env=None):
    saved = {k: os.environ.pop(k, None) for k in ("NO_COLOR", "FORCE_COLOR")}
    try:
        os.environ.update(env or {})
        return run_cli("--isolated", "--no-cache", "-q", "--format", "full", *paths, cwd=tmp_path).stdout
    finally:
        for k in ("NO_COLOR", "FORCE_COLOR"):
            os.environ.pop(k, None)
            if saved[k] is not None:
                os.environ[k] = saved[k]


def test_one_line_and_multi_line_findings(tmp_path, run_cli):
    (tmp_path / "one.py").write_text(ONE)
    (tmp_path / "multi.py").write_text(MULTI)
    assert run_full(run_cli, tmp_path, "one.py", "multi.py") == MULTI_GOLDEN + ONE_GOLDEN  # not a terminal: no colour


def test_colour_is_forced_and_no_color_wins(tmp_path, run_cli):
    (tmp_path / "one.py").write_text(ONE)
    assert run_full(run_cli, tmp_path, "one.py", env={"FORCE_COLOR": "1"}) == ONE_COLOR
    assert run_full(run_cli, tmp_path, "one.py", env={"FORCE_COLOR": "1", "NO_COLOR": "1"}) == ONE_GOLDEN


def test_notebook_finding_shows_its_cell(tmp_path, run_cli):
    (tmp_path / "train.ipynb").write_text(notebook([SETUP, TRAIN]), encoding="utf-8")
    assert run_full(run_cli, tmp_path, "train.ipynb") == NOTEBOOK_GOLDEN


def test_default_text_format_is_unchanged(tmp_path, run_cli):
    (tmp_path / "one.py").write_text(ONE)
    out = run_cli("--isolated", "--no-cache", "-q", "one.py", cwd=tmp_path).stdout
    assert out == f"one.py:4:5: TL004 [unsafe fix] {TL004}\n"


def test_report_file_has_no_colour_and_unreadable_files_have_no_source(tmp_path, run_cli):
    (tmp_path / "one.py").write_text(ONE)
    (tmp_path / "bad.py").write_bytes(b"x = 1\x00\n")
    saved = os.environ.get("FORCE_COLOR")
    os.environ["FORCE_COLOR"] = "1"
    try:
        run_cli("--isolated", "--no-cache", "-q", "--format", "full", "-o", "report.txt", "one.py", "bad.py",
                cwd=tmp_path)
    finally:
        os.environ.pop("FORCE_COLOR")
        if saved is not None:
            os.environ["FORCE_COLOR"] = saved
    report = (tmp_path / "report.txt").read_text()
    assert "\x1b[" not in report
    assert report.startswith("bad.py:1:1: TL900 file contains null bytes; it is not Python source\n\n") and ONE_GOLDEN in report


def test_rule_links_resolve_or_follow_the_configured_docs_url(tmp_path, run_cli):
    from tests.test_docs import linked_page

    (tmp_path / "one.py").write_text(ONE)
    out = run_cli("--no-cache", "-q", "--format", "full", "one.py", cwd=tmp_path).stdout
    [link] = [line.split("= rule: ", 1)[1] for line in out.splitlines() if "= rule: " in line]
    assert linked_page(link).name == "TL004.md"
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\ndocs-url = "https://docs.example.org/tl/"\n')
    out = run_cli("--no-cache", "-q", "--format", "full", "one.py", cwd=tmp_path).stdout
    assert "  = rule: https://docs.example.org/tl/TL004.md\n" in out
