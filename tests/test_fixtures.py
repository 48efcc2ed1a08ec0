"""Every autofix, proven by execution (fixtures/TL00N/<scenario>/{bad,fixed,reference}.py):

1. `torchlint --fix --unsafe-fixes bad.py` gives exactly fixed.py (and fixing again changes nothing);
2. fixed.py matches reference.py at every optimizer step (gradients and parameters, within Tolerance);
3. bad.py does not match (or fails with the documented PyTorch error): the fixture exercises the bug;
4. TL002: the fixed run keeps fewer saved tensors alive at every step than the original.

The device is TORCHLINT_DEVICE (cpu by default); with cuda and no GPU these tests skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import ROOT
from torchlint.engine import fix_source, lint_source

SCENARIOS = sorted(p for p in (ROOT / "fixtures").glob("TL*/*") if (p / "bad.py").is_file())
IDS = [f"{p.parent.name}/{p.name}" for p in SCENARIOS]
DEVICE = os.environ.get("TORCHLINT_DEVICE", "cpu")
EXPECTED_ERROR = {"TL001": "Trying to backward through the graph a second time"}


def test_every_rule_with_a_fix_has_three_scenarios():
    from torchlint.rules import ALL_RULES

    for rule in ALL_RULES:
        if rule.fix_safety is not None:
            assert len([p for p in SCENARIOS if p.parent.name == rule.code]) >= 3, rule.code


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_fix_output_is_exactly_fixed_py(scenario):
    bad = (scenario / "bad.py").read_text(encoding="utf-8")
    expected = (scenario / "fixed.py").read_text(encoding="utf-8")
    code = scenario.parent.name
    assert [d.code for d in lint_source(bad, "bad.py")] == [code]
    once = fix_source(bad, "bad.py", unsafe=True)
    assert once.text == expected
    assert once.remaining == [] and once.failed == []
    assert fix_source(once.text, "fixed.py", unsafe=True).text == once.text  # idempotent
    reference = (scenario / "reference.py").read_text(encoding="utf-8")
    assert lint_source(reference, "reference.py") == []


@pytest.fixture(scope="session")
def records():
    torch = pytest.importorskip("torch")
    if DEVICE.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip("TORCHLINT_DEVICE=cuda but no CUDA device is available")
    from torchlint.verify import run_scripts

    scripts = [s / name for s in SCENARIOS for name in ("bad.py", "fixed.py", "reference.py")]
    recs = run_scripts(scripts, DEVICE)
    return {str(path): rec for path, rec in zip(scripts, recs)}


def _rec(records, scenario: Path, name: str) -> dict:
    return records[str(scenario / name)]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_fixed_matches_reference(records, scenario):
    from torchlint.verify import compare_records

    fixed, reference = _rec(records, scenario, "fixed.py"), _rec(records, scenario, "reference.py")
    assert fixed["error"] is None and reference["error"] is None
    assert fixed["device"] == DEVICE
    assert len(fixed["steps"]) >= 3
    mismatch = compare_records(fixed, reference)
    assert mismatch is None, str(mismatch)


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.parent.name != "TL002"],
                         ids=[i for i in IDS if not i.startswith("TL002")])
def test_bad_does_not_match_reference(records, scenario):
    from torchlint.verify import compare_records

    bad, reference = _rec(records, scenario, "bad.py"), _rec(records, scenario, "reference.py")
    expected_error = EXPECTED_ERROR.get(scenario.parent.name)
    if expected_error is not None:
        assert bad["error"] is not None and expected_error in bad["error"]
    else:
        assert bad["error"] is None
        assert compare_records(bad, reference) is not None


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.parent.name == "TL002"],
                         ids=[i for i in IDS if i.startswith("TL002")])
def test_retain_graph_fix_frees_saved_tensors(records, scenario):
    from torchlint.verify import compare_records

    bad, fixed = _rec(records, scenario, "bad.py"), _rec(records, scenario, "fixed.py")
    assert compare_records(fixed, bad) is None  # behaviour kept: same gradients as the original
    bad_saved = [s["saved"] for s in bad["steps"]]
    fixed_saved = [s["saved"] for s in fixed["steps"]]
    assert len(bad_saved) == len(fixed_saved)
    assert all(f < b for f, b in zip(fixed_saved, bad_saved)), (fixed_saved, bad_saved)


def test_comparison_can_fail(records):
    """A perturbed copy of a matching run is reported with the step and parameter that differ."""
    import copy

    from torchlint.verify import compare_records

    scenario = SCENARIOS[0]
    fixed = copy.deepcopy(_rec(records, scenario, "fixed.py"))
    fixed["steps"][1]["params"][0] += 1e-3
    mismatch = compare_records(fixed, _rec(records, scenario, "reference.py"))
    assert mismatch is not None and (mismatch.step, mismatch.what, mismatch.index) == (1, "param", 0)
    assert abs(mismatch.max_abs - 1e-3) < 1e-4


def test_verify_command(run_cli):
    pytest.importorskip("torch")
    ok = run_cli("verify", "fixtures/TL005/script/fixed.py", "--reference", "fixtures/TL005/script/reference.py",
                 "--device", DEVICE, cwd=ROOT)
    assert ok.returncode == 0 and ok.stdout.startswith("OK: 3 optimizer steps match"), ok.stdout + ok.stderr
    bad = run_cli("verify", "fixtures/TL005/script/bad.py", "--reference", "fixtures/TL005/script/reference.py",
                  "--device", DEVICE, cwd=ROOT)
    assert bad.returncode == 1 and bad.stdout.startswith("MISMATCH: step 0: grad of parameter 0 differs")
