"""Every autofix, proven by execution (fixtures/TL00N/<scenario>/{bad,fixed,reference}.py):

1. `torchlint --fix --unsafe-fixes bad.py` gives exactly fixed.py (and fixing again changes nothing); a scenario's
   folder is its project, so bad.py may call a helper module beside it (engine.py);
2. fixed.py matches reference.py at every optimizer step (gradients and parameters, within Tolerance);
3. bad.py does not match (or fails with the documented PyTorch error): the fixture exercises the bug;
4. rules whose bug only wastes memory (`Rule.fixture_keeps_training`): the fixed run keeps fewer saved tensors alive at every step than the original.

The device is TORCHLINT_DEVICE (cpu by default); with cuda and no GPU these tests skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import ROOT
from torchlint.project import Project
from torchlint.engine import fix_source, lint_source
from torchlint.rules import all_rules, rule_by_code

SCENARIOS = sorted(p for p in (ROOT / "fixtures").glob("TL*/*") if (p / "bad.py").is_file())
IDS = [f"{p.parent.name}/{p.name}" for p in SCENARIOS]
DEVICE = os.environ.get("TORCHLINT_DEVICE", "cpu")
# Rules whose bug keeps training as it is (it only wastes memory): the original matches the reference too, and the
# proof of the fix is less memory kept alive.
BEHAVIOUR_KEEPING = tuple(r.code for r in all_rules() if r.fixture_keeps_training)


def _expected_error(scenario: Path) -> str | None:
    """The error the scenario's bad.py raises, as its rule declares it (`Rule.fixture_errors`)."""
    errors = rule_by_code(scenario.parent.name).fixture_errors
    return errors.get(scenario.name, errors.get("*"))


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
    # A scenario may import a helper module of its own folder (engine.py): the folder is the project.
    project = Project(scenario)
    bad_path, fixed_path = str(scenario / "bad.py"), str(scenario / "fixed.py")
    assert [d.code for d in lint_source(bad, bad_path, project=project)] == [code]
    once = fix_source(bad, bad_path, unsafe=True, project=project)
    assert once.text == expected
    assert once.remaining == [] and once.failed == []
    assert fix_source(once.text, fixed_path, unsafe=True, project=project).text == once.text  # idempotent
    reference = (scenario / "reference.py").read_text(encoding="utf-8")
    assert lint_source(reference, str(scenario / "reference.py"), project=project) == []
    for helper in sorted(set(scenario.glob("*.py")) - {scenario / n for n in ("bad.py", "fixed.py", "reference.py")}):
        assert lint_source(helper.read_text(encoding="utf-8"), str(helper), project=project) == []


@pytest.fixture(scope="session")
def records():
    torch = pytest.importorskip("torch")
    if DEVICE.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip("TORCHLINT_DEVICE=cuda but no CUDA device is available")
    from torchlint.verify import run_scripts

    scripts = [s / name for s in SCENARIOS for name in ("bad.py", "fixed.py", "reference.py")]
    keeping = [s for s in scripts if s.parent.parent.name in BEHAVIOUR_KEEPING]
    others = [s for s in scripts if s not in keeping]
    recs = run_scripts(others, DEVICE) + run_scripts(keeping, DEVICE, count_graph=True)
    return {str(path): rec for path, rec in zip(others + keeping, recs)}


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


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.parent.name not in BEHAVIOUR_KEEPING],
                         ids=[i for i in IDS if not i.startswith(BEHAVIOUR_KEEPING)])
def test_bad_does_not_match_reference(records, scenario):
    from torchlint.verify import compare_records

    bad, reference = _rec(records, scenario, "bad.py"), _rec(records, scenario, "reference.py")
    expected_error = _expected_error(scenario)
    if expected_error is not None:
        assert bad["error"] is not None and expected_error in bad["error"]
    else:
        assert bad["error"] is None
        assert compare_records(bad, reference) is not None


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.parent.name in BEHAVIOUR_KEEPING],
                         ids=[i for i in IDS if i.startswith(BEHAVIOUR_KEEPING)])
def test_safe_fix_keeps_gradients_and_frees_saved_tensors(records, scenario):
    from torchlint.verify import compare_records

    bad, fixed = _rec(records, scenario, "bad.py"), _rec(records, scenario, "fixed.py")
    assert compare_records(fixed, bad) is None  # behaviour kept: same gradients as the original
    assert compare_records(bad, _rec(records, scenario, "reference.py")) is None  # the bug costs memory, not gradients
    # TL002 keeps saved activations alive; TL007 keeps whole graphs (their nodes) alive across iterations.
    metric = "saved" if scenario.parent.name == "TL002" else "graph_nodes"
    bad_kept = [s[metric] for s in bad["steps"]]
    fixed_kept = [s[metric] for s in fixed["steps"]]
    assert len(bad_kept) == len(fixed_kept) >= 3
    # TL007's total is added to after the first step, so the runs differ from the second step on.
    first = 0 if metric == "saved" else 1
    assert all(f <= b for f, b in zip(fixed_kept, bad_kept)), (metric, fixed_kept, bad_kept)
    assert all(f < b for f, b in zip(fixed_kept[first:], bad_kept[first:])), (metric, fixed_kept, bad_kept)
    if metric == "graph_nodes":  # the leak grows with every step; the fixed run stays flat
        assert bad_kept[-1] > bad_kept[1] > bad_kept[0] and fixed_kept[-1] == fixed_kept[0], (fixed_kept, bad_kept)


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
    torch = pytest.importorskip("torch")
    if DEVICE.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip("TORCHLINT_DEVICE=cuda but no CUDA device is available")
    ok = run_cli("verify", "fixtures/TL005/script/fixed.py", "--reference", "fixtures/TL005/script/reference.py",
                 "--device", DEVICE, cwd=ROOT)
    assert ok.returncode == 0 and ok.stdout.startswith("OK: 3 optimizer steps match"), ok.stdout + ok.stderr
    bad = run_cli("verify", "fixtures/TL005/script/bad.py", "--reference", "fixtures/TL005/script/reference.py",
                  "--device", DEVICE, cwd=ROOT)
    assert bad.returncode == 1 and bad.stdout.startswith("MISMATCH: step 0: grad of parameter 0 differs")
