"""`torchlint --fix --verify`: each fix proven on a run of the script before it is written (torchlint.fix_verify)."""

from __future__ import annotations

import re
import shutil

import pytest

from tests.conftest import ROOT

# One scenario per rule with a fix (the first of each rule's folder).
ONE_PER_RULE = [sorted(p for p in d.iterdir() if (p / "bad.py").is_file())[0]
                for d in sorted((ROOT / "fixtures").glob("TL*")) if d.is_dir()]


@pytest.mark.parametrize("scenario", ONE_PER_RULE, ids=[f"{p.parent.name}/{p.name}" for p in ONE_PER_RULE])
def test_fix_verify_proves_and_writes_each_rules_fix(tmp_path, run_cli, scenario, device):
    work = tmp_path / scenario.name
    shutil.copytree(scenario, work)
    r = run_cli("--fix", "--verify", "--unsafe-fixes", "--steps", "4", "bad.py", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    code = scenario.parent.name
    verdict = re.search(rf"bad\.py:\d+:\d+: {code} (safe|unsafe) fix verified: (.*)", r.stderr)
    assert verdict is not None, r.stderr
    if verdict.group(1) == "safe":
        assert verdict.group(2).startswith("identical gradients and parameters at all")
        if code == "TL002":  # the memory the fix saves, in buffers and in bytes
            assert re.search(r"\d+ -> \d+ autograd buffers, [\d.]+ \S+ -> [\d.]+ \S+ saved for backward$",
                             verdict.group(2)), verdict.group(2)
    elif code == "TL005":
        assert "the first step's gradient is now the mean over its" in verdict.group(2)
    else:
        from torchlint.fix_verify import PROMISES

        assert verdict.group(2).endswith(PROMISES[code])
    assert (work / "bad.py").read_text() == (scenario / "fixed.py").read_text()


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
    from torchlint.analysis.walk import walk
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
    its own graph (it used to count the original's graphs too, which the recorder's own saved-tensor hook kept
    alive: 57 nodes from the first step, above the original's 12 to 47), and the original's count does not grow
    either (the script rebinds its loss: one iteration's graph is alive after each step, as without torchlint)."""
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
