"""Recall on real bugs: how many of the fixed bugs of a real-bugs folder torchlint reports, and which it misses.

    python benchmarks/realbugs.py [FOLDER]        # default: $TORCHLINT_REALBUGS, the materialized real bugs

FOLDER holds a cases.json (one object per bug: `id`, `code`, `path`, `lines`; for a notebook `cell` and
`cell_lines`) and one sub-folder per case, named by its id, with the repository at its buggy commit. Each
repository is linted from its root, as a user would, one after the other; a case is found when a finding with
its code is in its file within 2 lines of one of its lines. Prints each miss, found/total and the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SLACK = 2


def lint(folder: Path) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "torchlint", "--isolated", "--no-cache", "--exit-zero", "--format", "json", "."],
        cwd=folder, capture_output=True, text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"torchlint failed on {folder} (exit {out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout)


def reports(case: dict, finding: dict) -> bool:
    if finding["code"] != case["code"] or Path(finding["path"]).as_posix().removeprefix("./") != case["path"]:
        return False
    if "cell" in case:
        return finding.get("cell") == case["cell"] and any(
            abs(finding["line"] - line) <= SLACK for line in case["cell_lines"])
    return any(abs(finding["line"] - line) <= SLACK for line in case["lines"])


def where(case: dict) -> str:
    if "cell" in case:
        return f"{case['path']}:cell {case['cell']}:{case['cell_lines'][0]}"
    return f"{case['path']}:{case['lines'][0]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=os.environ.get("TORCHLINT_REALBUGS"),
                        help="default: $TORCHLINT_REALBUGS (../shared/realbugs/materialize.sh writes it)")
    args = parser.parse_args()
    if args.folder is None:
        parser.error("give FOLDER or set TORCHLINT_REALBUGS to the folder ../shared/realbugs/materialize.sh wrote")
    folder = Path(args.folder).resolve()
    if not (folder / "cases.json").is_file():
        parser.error(f"{folder} has no cases.json: not a materialized real-bugs folder")
    cases = json.loads((folder / "cases.json").read_text())

    start = time.perf_counter()
    misses = []
    try:
        for case in cases:
            if not any(reports(case, d) for d in lint(folder / case["id"])):
                misses.append(case)
    except RuntimeError as error:
        print(error, file=sys.stderr)
        return 2
    wall = time.perf_counter() - start

    for case in misses:
        print(f"  miss {case['id']} {case['code']} {where(case)}")
    print(f"\n{folder.name}: found {len(cases) - len(misses)}/{len(cases)}, {wall:.2f} s for {len(cases)} cold runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
