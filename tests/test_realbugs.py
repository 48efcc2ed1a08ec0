"""Recall on real bugs: training-loop bugs that public projects later fixed, each linted from its repository's root
as a user would. Each case must be reported with its rule, in its file, within 2 lines of a line its fix changed.
Two sets: ../shared/realbugs (87 cases; TORCHLINT_REALBUGS names the folder its materialize.sh wrote) and the cases
mined for issue 27, whose manifest is benchmarks/mined/cases.json (TORCHLINT_MINED names the folder
benchmarks/mined/materialize.py wrote). The code is fetched, never kept: without a set's variable its tests skip."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import fetched_dataset

ROOT = Path(__file__).resolve().parent.parent
MINED_MANIFEST = ROOT / "benchmarks" / "mined" / "cases.json"
SLACK = 2  # lines: the fix may change a line beside the one the finding points at

# The cases torchlint does not find yet (the recall work of issue 27). Each is a strict xfail: finding one of them
# fails the test until it leaves its set, so the count stays honest in both directions.
KNOWN_MISSES = frozenset({
    "rb56", "rb60", "rb72",
    "rb76", "rb77",
})
KNOWN_MISSES_MINED = frozenset({
    "mb00", "mb01", "mb06", "mb11", "mc00",
    "mc02", "mc04", "mc08", "mc09", "mc12",
    "md00", "md02",
    "me02", "me05", "me08",
    "mf02", "mf05",
    "mg01", "mg03", "mg04", "mg05", "mg06", "mg07", "mg09", "mg10", "mg11",
    "mh25",
    "mi02",
    "mj01", "mj07", "mj08", "mj11", "mj14", "mj15",
    "mk01", "mk03", "mk05",
    "ml05", "ml06", "ml07", "ml08", "ml23", "ml24", "ml25",
    "mm04", "mm05", "mm10",
})

# variable, what to run, known misses
SETS = {
    "realbugs": ("TORCHLINT_REALBUGS", "fetch the repositories of ../shared/realbugs/cases.json, run "
                 "`MIRRORS=... ../shared/realbugs/materialize.sh OUT` and set TORCHLINT_REALBUGS=OUT (CI cannot fetch)",
                 KNOWN_MISSES),
    "mined": ("TORCHLINT_MINED", "fetch the repositories of benchmarks/mined/cases.json, run "
              "`python benchmarks/mined/materialize.py OUT` and set TORCHLINT_MINED=OUT (CI cannot fetch)",
              KNOWN_MISSES_MINED),
}


class Missed(AssertionError):
    """The case's finding is absent. Only this counts as a known miss: a crash of torchlint still fails."""


def _case_params() -> list:
    # Collection needs the ids before any fixture runs; without a data set one placeholder reports its skip.
    params = []
    for name, (variable, _, misses) in SETS.items():
        value = os.environ.get(variable)
        cases_file = Path(value).expanduser() / "cases.json" if value else None
        if cases_file is None or not cases_file.is_file():
            params.append(pytest.param(name, None, id=f"{name}-no-data-set"))
            continue
        for case in json.loads(cases_file.read_text()):
            marks = ()
            if case["id"] in misses:
                marks = pytest.mark.xfail(strict=True, raises=Missed,
                                          reason=f"torchlint misses {case['code']} in {case['path']}")
            params.append(pytest.param(name, case, id=case["id"], marks=marks))
    return params


def _dataset(name: str) -> Path:
    variable, how, _ = SETS[name]
    return fetched_dataset(variable, "cases.json", how)


@pytest.fixture(scope="module")
def findings():
    """Lints a case's folder on first use and keeps the result for the module: each repository is linted once,
    and under pytest-xdist a worker lints only the repositories of the cases it was given."""

    @functools.cache
    def lint(dataset: str, case_id: str) -> tuple[dict, ...]:
        folder = _dataset(dataset) / case_id
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


@pytest.mark.parametrize(("dataset", "case"), _case_params())
def test_real_bug_is_found(findings, dataset, case):
    folder = _dataset(dataset)
    assert case is not None, f"{folder / 'cases.json'} could not be read at collection"
    found = findings(dataset, case["id"])
    if not any(_reports(case, d) for d in found):
        where = ", ".join(f"{d['path']}:{d['line']} {d['code']}" for d in found) or "nothing"
        raise Missed(f"{case['id']} ({case['repo']}): no {case['code']} in {case['path']} within {SLACK} lines of "
                     f"{case.get('cell_lines', case['lines'])}; torchlint reported {where}")


@pytest.mark.parametrize("dataset", sorted(SETS))
def test_known_misses_are_cases(dataset):
    ids = {case["id"] for case in json.loads((_dataset(dataset) / "cases.json").read_text())}
    misses = SETS[dataset][2]
    assert misses <= ids, f"known misses name ids that are not cases: {sorted(misses - ids)}"


def test_mined_set_is_the_manifest():
    """The materialized mined set is the project's manifest, so the figures are those of the cases kept here."""
    assert json.loads((_dataset("mined") / "cases.json").read_text()) == json.loads(MINED_MANIFEST.read_text())


def test_mined_manifest_holds_facts_only():
    facts = {"id", "code", "repo", "commit", "path", "lines", "report", "cell", "cell_lines"}
    cases = json.loads(MINED_MANIFEST.read_text())
    assert len({case["id"] for case in cases}) == len(cases)
    for case in cases:
        assert set(case) <= facts and {"id", "code", "repo", "commit", "path", "lines", "report"} <= set(case), case
        assert len(case["commit"]) == 40 and case["report"].startswith("https://"), case
