"""`torchlint --fix --verify`: each fix proven on a run of the script before it is written (torchlint.fix_verify)."""

from __future__ import annotations

import os
import re
import shutil

import pytest

from tests.conftest import ROOT


def test_a_safe_fix_that_changes_training_is_withdrawn(tmp_path, device):
    """A rule whose 'safe' fix doubles the learning rate: the run shows different parameters, so the fix is not
    written and is reported as TL903."""
    from torchlint.fix_verify import diagnostics, verify_fixes

    wrong_safe_fix = _number_rule("TL004", "safe", "0.1", "0.2")  # doubles the learning rate
    script = tmp_path / "train.py"
    text = ("import torch\nmodel = torch.nn.Linear(3, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "for _ in range(5):\n    opt.zero_grad()\n    model(torch.ones(2, 3)).sum().backward()\n    opt.step()\n")
    script.write_text(text)
    verdicts, new_text = verify_fixes(script, [wrong_safe_fix], False, 3, device)
    assert new_text is None and [v.kept for v in verdicts] == [False]
    [diag] = diagnostics(str(script), verdicts)
    assert diag.code == "TL903" and "withdrawn: on this script it changes training" in diag.message
    assert script.read_text() == text
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # the candidates are removed


def test_an_unsafe_fix_that_keeps_the_bug_is_withdrawn(tmp_path, device):
    """A TL003 'fix' that keeps the term cut (it only scales it): training changes, but the run still shows a value
    cut at that line that the backward never reaches."""
    from torchlint.fix_verify import verify_fixes

    keeps_the_cut = _number_rule("TL003", "unsafe", "0.5", "0.25")  # `0.5 * reg_loss.detach()` -> `0.25 * ...`
    script = tmp_path / "bad.py"
    shutil.copy(ROOT / "fixtures" / "TL003" / "script_detach" / "bad.py", script)
    verdicts, new_text = verify_fixes(script, [keeps_the_cut], True, 3, device)
    assert new_text is None and [(v.kept, v.detail) for v in verdicts] == [
        (False, "withdrawn: the run of the fixed script does not keep what TL003 promises")]


def _number_rule(code: str, applicability: str, old: str, new: str):
    """A rule (for these tests only) that reports the number `old` with a fix that writes `new` in its place."""
    import libcst as cst

    from torchlint.diagnostic import Fix
    from torchlint.rules.base import Finding, Rule

    class NumberRule(Rule):
        name = "test-only"
        summary = "test only"
        requires = ()
        doc = ""

        def check(self, model):
            for node in _floats(model.module):
                if node.value == old:
                    yield Finding(node, "number", Fix(applicability, f"write {new}", ((node, cst.Float(new)),)))

    NumberRule.code = code
    return NumberRule


def _floats(module):
    from torchlint.source.walk import walk
    import libcst as cst

    return [n for n in walk(module, descend_scopes=True) if isinstance(n, cst.Float)]


def test_verify_needs_fix(tmp_path, run_cli):
    (tmp_path / "t.py").write_text("x = 1\n")
    r = run_cli("--verify", "t.py", cwd=tmp_path)
    assert r.returncode == 2 and "--verify goes with --fix" in r.stderr


def test_report_plots_each_fix_before_and_after(tmp_path, run_cli, device):
    pytest.importorskip("matplotlib")
    import base64
    import html.parser

    work = tmp_path / "records"
    shutil.copytree(ROOT / "fixtures" / "TL007" / "script", work)
    r = run_cli("--fix", "--verify", "--report", "report.html", "bad.py", cwd=work)
    assert r.returncode == 0, r.stderr
    page = (work / "report.html").read_text()
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 1 and base64.b64decode(images[0]).startswith(b"\x89PNG")
    assert "TL007" in page and "kept: identical gradients and parameters" in page
    html.parser.HTMLParser().feed(page)  # well-formed enough to parse


def test_verify_runs_on_the_device_torchlint_device_names(monkeypatch):
    """--fix --verify, like `torchlint run` and `torchlint verify`, runs on $TORCHLINT_DEVICE unless told otherwise
    (so that .ci/cuda runs these tests on the GPU)."""
    from torchlint.cli import build_parser

    monkeypatch.setenv("TORCHLINT_DEVICE", "cuda")
    assert build_parser().parse_args(["--fix", "--verify", "t.py"]).device == "cuda"
    assert build_parser().parse_args(["--fix", "--verify", "--device", "cpu", "t.py"]).device == "cpu"
    monkeypatch.delenv("TORCHLINT_DEVICE")
    assert build_parser().parse_args(["--fix", "--verify", "t.py"]).device == "cpu"


def test_each_run_counts_only_its_own_graph(tmp_path, device):
    """TL002's fix, as --report plots it: the fixed run, recorded after the original in the same process, counts only
    its own graph (not the original's graphs too, which the recorder's own saved-tensor hook could keep alive:
    that would give 57 nodes from the first step, above the original's 12 to 47), and the original's count does
    not grow either (the script rebinds its loss: one iteration's graph is alive after each step, as without
    torchlint)."""
    from torchlint.engine import select_rules
    from torchlint.fix_verify import verify_fixes
    from torchlint.verify.runner import run_scripts

    work = tmp_path / "script"
    shutil.copytree(ROOT / "fixtures" / "TL002" / "script", work)
    runs: list[dict] = []
    verdicts, _ = verify_fixes(work / "bad.py", select_rules(["TL002"]), False, 6, device, runs=runs)
    assert [v.kept for v in verdicts] == [True]
    [run] = runs
    original = [s["graph_nodes"] for s in run["original"]["steps"]]
    fixed = [s["graph_nodes"] for s in run["fixed"]["steps"]]
    alone = [s["graph_nodes"] for s in run_scripts([work / "fixed.py"], device, count_graph=True)[0]["steps"]]
    assert len(original) == len(fixed) == 6 and fixed == alone, (original, fixed, alone)
    assert all(0 < f <= o for f, o in zip(fixed, original)) and len(set(original)) == 1, (original, fixed)
    saved = [s["saved"] for s in run["original"]["steps"]]
    assert len(set(saved)) == 1 and saved[0] > 0 and {s["saved"] for s in run["fixed"]["steps"]} == {0}


RETAINED = ("import torch\nmodel = torch.nn.Linear(3, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "{before}for _ in range({n}):\n    opt.zero_grad()\n    loss = model(torch.ones(2, 3)).sum()\n"
            "    loss.backward(retain_graph=True)\n    opt.step()\n{after}")


def test_a_fix_proven_on_no_step_is_not_written(tmp_path, run_cli, device):
    """A script that takes no optimizer step proves nothing: its fix is reported TL903, not 'verified at all 0
    steps', and the file is not rewritten."""
    script = tmp_path / "train.py"
    script.write_text(text := RETAINED.format(before="", n=0, after=""))
    r = run_cli("--fix", "--verify", "--steps", "3", "--device", device, "train.py", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "fix verified" not in r.stderr
    assert ("train.py:7:5: TL903 safe fix for TL002 not verified: the script took no optimizer step; the fix is not "
            "written") in r.stdout
    assert script.read_text() == text
    assert "Fixed 0 problems." in r.stdout


def test_a_script_that_exits_is_verified_on_the_steps_it_took_and_the_next_file_still_runs(tmp_path, run_cli,
                                                                                           device):
    """sys.exit(0) after training ends the run as its last line would: no traceback, the fix is verified on the
    steps taken, and the files after it are processed."""
    (tmp_path / "a.py").write_text(RETAINED.format(before="import sys\n", n=3, after="sys.exit(0)\n"))
    (tmp_path / "b.py").write_text(RETAINED.format(before="", n=3, after=""))
    r = run_cli("--fix", "--verify", "--steps", "5", "--device", device, "a.py", "b.py", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert "a.py:8:5: TL002 safe fix verified: identical gradients and parameters at all 3 steps" in r.stderr
    assert "b.py:7:5: TL002 safe fix verified: identical gradients and parameters at all 3 steps" in r.stderr
    assert "retain_graph" not in (tmp_path / "a.py").read_text() + (tmp_path / "b.py").read_text()


ARGPARSE = RETAINED.format(
    before="import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--steps', type=int, "
           "required=True)\nparser.add_argument('--name')\nargs = parser.parse_args()\nassert args.name == 'a b'\n",
    n="args.steps", after="")


def test_a_script_that_needs_arguments_is_not_verified_without_them(tmp_path, run_cli, device):
    script = tmp_path / "train.py"
    script.write_text(ARGPARSE)
    r = run_cli("--fix", "--verify", "--device", device, "train.py", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert ("TL903 safe fix for TL002 not verified: the script failed before its first optimizer step (SystemExit: "
            "2; pass the script's arguments with --verify-args); the fix is not written") in r.stdout
    assert script.read_text() == ARGPARSE


def test_verify_args_are_the_scripts_arguments(tmp_path, run_cli, device):
    script = tmp_path / "train.py"
    script.write_text(ARGPARSE)
    r = run_cli("--fix", "--verify", "--device", device, "--verify-args", "--steps 4 --name 'a b'", "train.py",
                cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "TL002 safe fix verified: identical gradients and parameters at all 4 steps" in r.stderr
    assert script.read_text() == ARGPARSE.replace("retain_graph=True", "")


def test_an_edit_saved_during_the_verification_is_kept(tmp_path, run_cli, device):
    """The script stands in for an editor: its first run (the original's) saves a change to the file while
    torchlint verifies the fix. The fix was proven on the old text: it is not written over the edit."""
    script = tmp_path / "train.py"
    edit = ("from pathlib import Path\nif 'torchlint-verify' not in __file__:\n"
            "    Path(__file__).write_text(Path(__file__).read_text() + '# saved by the editor\\n')\n")
    script.write_text(text := RETAINED.format(before=edit, n=3, after=""))
    r = run_cli("--fix", "--verify", "--steps", "3", "--device", device, "train.py", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "torchlint: error: train.py: changed since torchlint read it; not written (run the command again)" in r.stderr
    assert script.read_text() == text + "# saved by the editor\n"


def test_candidates_left_by_a_killed_run_are_not_checked_and_are_removed(tmp_path, run_cli, device):
    """`kill -9` during --fix --verify leaves its candidates beside the script: the next run linted them."""
    (tmp_path / "train.py").write_text(RETAINED.format(before="", n=3, after=""))
    dead = tmp_path / f".train.torchlint-verify-{2**22 + 12345}-0.py"  # above any pid Linux hands out by default
    dead.write_text(RETAINED.format(before="", n=3, after=""))
    r = run_cli("--no-cache", "-q", ".", cwd=tmp_path)
    assert [line.split(":")[0] for line in r.stdout.splitlines()] == ["train.py"], r.stdout
    r = run_cli("--fix", "--verify", "--steps", "2", "--device", device, "train.py", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_a_script_that_ends_in_os_exit_is_said_not_verified_and_its_finding_is_shown(tmp_path, run_cli, device):
    """`os._exit(0)` at the end of a script ended the recorder's process before it saved the run: torchlint printed
    "No such file or directory", then "All checks passed" for a file with a finding."""
    script = tmp_path / "train.py"
    script.write_text(text := RETAINED.format(before="import os\n", n=3, after="os._exit(0)\n"))
    r = run_cli("--fix", "--verify", "--steps", "5", "--device", device, "train.py", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "No such file or directory" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert ("torchlint: error: train.py: the run of train.py ended before it was recorded (os._exit() or a "
            "signal); nothing was verified") in r.stderr, r.stderr
    assert r.stdout.startswith("train.py:8:5: TL002 "), r.stdout
    assert "All checks passed" not in r.stdout and script.read_text() == text


def test_verify_on_cuda_without_cuda_says_so_before_anything_runs(tmp_path, run_cli):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is available here")
    script = tmp_path / "train.py"
    script.write_text(text := RETAINED.format(before="", n=3, after=""))
    r = run_cli("--fix", "--verify", "--device", "cuda", "train.py", cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (
        2, "", "torchlint: error: --device cuda but no CUDA device is available\n")
    assert script.read_text() == text


def test_verify_command_with_no_step_to_compare_is_not_ok(tmp_path, run_cli, device):
    """`torchlint verify` said OK, exit 0, when neither script took a step: nothing was compared."""
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(RETAINED.format(before="", n=0, after=""))
    r = run_cli("verify", "--device", device, "a.py", "--reference", "b.py", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "OK" not in r.stdout
    assert r.stdout == "NOT VERIFIED: neither script took an optimizer step; nothing was compared\n"


def test_the_script_runs_from_where_the_user_stands(tmp_path, run_cli, device):
    """`python scripts/train.py` reads `data/scale.txt` from the current directory and writes its log there; --verify
    ran the script from its own folder, where the data is not (TL903) and the log went elsewhere."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "scale.txt").write_text("0.5\n")
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "train.py"
    script.write_text(RETAINED.format(before="scale = float(open('data/scale.txt').read())\n", n=3,
                                      after="open('log.txt', 'a').write('done\\n')\n"))
    r = run_cli("--fix", "--verify", "--steps", "5", "--device", device, "scripts/train.py", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "scripts/train.py:8:5: TL002 safe fix verified: identical gradients and parameters at all 3 steps" in r.stderr
    assert (tmp_path / "log.txt").is_file() and not (tmp_path / "scripts" / "log.txt").exists()


def test_report_without_matplotlib_says_so_before_anything_is_written(tmp_path, run_cli):
    """Without matplotlib, --report failed after the fixes were written: exit 1, and no findings printed."""
    import subprocess

    hidden = tmp_path / "no_matplotlib"
    (hidden / "matplotlib").mkdir(parents=True)
    (hidden / "matplotlib" / "__init__.py").write_text("raise ImportError('No module named matplotlib')\n")
    work = tmp_path / "work"
    work.mkdir()
    script = work / "train.py"
    script.write_text(text := RETAINED.format(before="", n=3, after=""))
    r = subprocess.run([shutil.which("torchlint"), "--fix", "--verify", "--report", "r.html", "train.py"], cwd=work,
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(hidden)})
    assert (r.returncode, r.stdout, r.stderr) == (
        2, "", "torchlint: error: --report needs matplotlib: pip install 'torchlint[report]'\n")
    assert script.read_text() == text and sorted(p.name for p in work.iterdir()) == ["train.py"]
