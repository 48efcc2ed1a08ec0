"""Recall on real bugs: 87 training-loop bugs that public projects later fixed (../shared/realbugs/cases.json),
each linted from its repository's root as a user would. Each case must be reported with its rule, in its file,
within 2 lines of a line its fix changed. The code is fetched, never kept: TORCHLINT_REALBUGS names the folder
that ../shared/realbugs/materialize.sh wrote; without it these tests skip."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import fetched_dataset

VARIABLE = "TORCHLINT_REALBUGS"
HOW = ("fetch the repositories of ../shared/realbugs/cases.json, run "
       "`MIRRORS=... ../shared/realbugs/materialize.sh OUT` and set TORCHLINT_REALBUGS=OUT (CI cannot fetch)")
SLACK = 2  # lines: the fix may change a line beside the one the finding points at

# The cases torchlint does not find yet (29 of 87: the recall work of issue 27). Each is a strict xfail: finding one
# of them fails the test until it leaves this set, so the count stays honest in both directions.
KNOWN_MISSES = frozenset({
    "rb14", "rb16", "rb25", "rb26", "rb29", "rb30", "rb36", "rb40", "rb44", "rb45", "rb46", "rb49", "rb50",
    "rb56", "rb57", "rb59", "rb60", "rb61", "rb63", "rb72", "rb73", "rb75", "rb76",
    "rb77", "rb78", "rb79", "rb82", "rb83", "rb86",
})


class Missed(AssertionError):
    """The case's finding is absent. Only this counts as a known miss: a crash of torchlint still fails."""


def _case_params() -> list:
    # Collection needs the ids before any fixture runs; without the data set one placeholder reports the skip.
    value = os.environ.get(VARIABLE)
    cases_file = Path(value).expanduser() / "cases.json" if value else None
    if cases_file is None or not cases_file.is_file():
        return [pytest.param(None, id="no-data-set")]
    params = []
    for case in json.loads(cases_file.read_text()):
        marks = ()
        if case["id"] in KNOWN_MISSES:
            marks = pytest.mark.xfail(strict=True, raises=Missed,
                                      reason=f"torchlint misses {case['code']} in {case['path']}")
        params.append(pytest.param(case, id=case["id"], marks=marks))
    return params


@pytest.fixture(scope="module")
def realbugs() -> Path:
    return fetched_dataset(VARIABLE, "cases.json", HOW)


@pytest.fixture(scope="module")
def findings(realbugs: Path):
    """Lints a case's folder on first use and keeps the result for the module: each repository is linted once,
    and under pytest-xdist a worker lints only the repositories of the cases it was given."""

    @functools.cache
    def lint(case_id: str) -> tuple[dict, ...]:
        folder = realbugs / case_id
        assert folder.is_dir(), f"{folder} is missing: materialize the data set again"
        out = subprocess.run(
            [sys.executable, "-m", "torchlint", "--isolated", "--no-cache", "--format", "json", "--exit-zero", "."],
            cwd=folder, capture_output=True, text=True, timeout=600,
        )
        assert out.returncode == 0, f"torchlint failed on {case_id} (exit {out.returncode}):\n{out.stderr}"
        return tuple(json.loads(out.stdout))

    return lint


def _reports(case: dict, finding: dict) -> bool:
    if finding["code"] != case["code"] or Path(finding["path"]).as_posix().removeprefix("./") != case["path"]:
        return False
    if "cell" in case:  # a notebook: torchlint reports the cell and a line inside it
        return finding.get("cell") == case["cell"] and any(
            abs(finding["line"] - line) <= SLACK for line in case["cell_lines"])
    return any(abs(finding["line"] - line) <= SLACK for line in case["lines"])


@pytest.mark.parametrize("case", _case_params())
def test_real_bug_is_found(realbugs, findings, case):
    assert case is not None, f"{realbugs / 'cases.json'} could not be read at collection"
    found = findings(case["id"])
    if not any(_reports(case, d) for d in found):
        where = ", ".join(f"{d['path']}:{d['line']} {d['code']}" for d in found) or "nothing"
        raise Missed(f"{case['id']} ({case['repo']}): no {case['code']} in {case['path']} within {SLACK} lines of "
                     f"{case.get('cell_lines', case['lines'])}; torchlint reported {where}")


def test_known_misses_are_cases(realbugs):
    ids = {case["id"] for case in json.loads((realbugs / "cases.json").read_text())}
    assert KNOWN_MISSES <= ids, f"KNOWN_MISSES names ids that are not cases: {sorted(KNOWN_MISSES - ids)}"
