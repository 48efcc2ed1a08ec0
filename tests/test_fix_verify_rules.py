"""`torchlint --fix --verify` on one scenario of each rule's fixtures: the fix is proven on a run of the script
and written (torchlint.fix_verify). Kept apart from tests/test_fix_verify.py so that pytest-xdist's module
scheduling runs the two long modules on different workers."""

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
        if code == "TL002":  # the memory the fix saves, in buffers and in bytes, and on CUDA the peak it reached
            peak = r", peak CUDA memory [\d.]+ \S+ -> [\d.]+ \S+" if device == "cuda" else ""
            assert re.search(rf"\d+ -> \d+ autograd buffers, [\d.]+ \S+ -> [\d.]+ \S+ saved for backward{peak}$",
                             verdict.group(2)), verdict.group(2)
    elif code == "TL005":
        assert "the first step's gradient is now the mean over its" in verdict.group(2)
    else:
        from torchlint.rules import rule_by_code

        assert verdict.group(2).endswith(rule_by_code(code).fix_promise)
    assert (work / "bad.py").read_text() == (scenario / "fixed.py").read_text()
