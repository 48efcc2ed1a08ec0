"""Precision on real code: torchlint over the dev set (11 popular repositories at pinned commits, listed in
../shared/realcode) must report exactly the real bugs listed in its TRUE.json, and safe fixes must change nothing
else. The code itself is fetched, never kept: TORCHLINT_REALCODE names the folder that
../shared/realcode/materialize.sh wrote; without it these tests skip."""

from __future__ import annotations

import filecmp
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, fetched_dataset

EXTRA_TRUE = ROOT / "tests" / "realcode_true_extra.json"
HOW = ("fetch the repositories of ../shared/realcode/repos.txt, run "
       "`MIRRORS=... ../shared/realcode/materialize.sh OUT` and set TORCHLINT_REALCODE=OUT (CI cannot fetch)")


@pytest.fixture(scope="module")
def realcode() -> Path:
    return fetched_dataset("TORCHLINT_REALCODE", "TRUE.json", HOW)


def _torchlint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchlint", "--isolated", "--no-cache", *args],
        cwd=cwd, capture_output=True, text=True, timeout=600,
    )


@pytest.fixture(scope="module")
def realcode_findings(realcode: Path) -> tuple[list[dict], list[dict]]:
    root = realcode
    out = _torchlint("--format", "json", "--exit-zero", ".", cwd=root)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    # Real bugs found here later than TRUE.json was written are kept in the project's own test data (the dev
    # set is never edited), each with the misbehaviour it causes.
    true = json.loads((root / "TRUE.json").read_text()) + json.loads(EXTRA_TRUE.read_text())
    return found, true


def _key(path: str, line: int, code: str) -> tuple[str, int, str]:
    return (Path(path).as_posix().removeprefix("./"), line, code)


def test_no_false_findings(realcode_findings):
    found, true = realcode_findings
    expected = {_key(t["path"], t["line"], t["code"]) for t in true}
    false = [d for d in found if _key(d["path"], d["line"], d["code"]) not in expected]
    assert not false, "false findings on real code:\n" + "\n".join(
        f"{d['path']}:{d['line']}:{d['column']}: {d['code']} {d['message']}" for d in false
    )


def test_every_true_finding_is_found(realcode_findings):
    found, true = realcode_findings
    got = {_key(d["path"], d["line"], d["code"]) for d in found}
    missed = [t for t in true if _key(t["path"], t["line"], t["code"]) not in got]
    assert not missed, "real bugs not found:\n" + "\n".join(
        f"{t['path']}:{t['line']}: {t['code']} ({t['why']})" for t in missed
    )


def test_safe_fixes_change_only_true_findings(realcode, realcode_findings, tmp_path):
    _, true = realcode_findings
    copy = tmp_path / "realcode"
    shutil.copytree(realcode, copy, symlinks=True)
    out = _torchlint("--fix", "--exit-zero", ".", cwd=copy)
    assert out.returncode == 0, out.stderr
    allowed = {(t["path"], t["line"]) for t in true}
    changed: list[str] = []
    for path in sorted(realcode.rglob("*")):
        if not path.is_file() or path.suffix not in (".py", ".ipynb"):
            continue
        rel = path.relative_to(realcode).as_posix()
        if filecmp.cmp(path, copy / rel, shallow=False):
            continue
        before = path.read_text(errors="replace").splitlines()
        after = (copy / rel).read_text(errors="replace").splitlines()
        lines = {i + 1 for i, (a, b) in enumerate(zip(before, after)) if a != b}
        if len(before) != len(after) or any((rel, line) not in allowed for line in lines):
            changed.append(f"{rel}: lines {sorted(lines)[:5]} (lengths {len(before)} -> {len(after)})")
    assert not changed, "safe fixes changed real code outside the true findings:\n" + "\n".join(changed)
