"""Precision on real code: findings per rule on a folder of real repositories, judged against its TRUE.json.

    python benchmarks/realcode.py [FOLDER]        # default: $TORCHLINT_REALCODE, the materialized dev set

FOLDER holds one sub-folder per repository and a TRUE.json listing the findings that are real bugs
(`path`, `line`, `code`); for the dev set, tests/realcode_true_extra.json adds the real bugs found there since.
Every other finding counts as false. Prints the findings per rule (true / false),
the precision, the recall of TRUE.json, and the wall time of one cold run (no cache).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=os.environ.get("TORCHLINT_REALCODE"),
                        help="default: $TORCHLINT_REALCODE (../shared/realcode/materialize.sh writes it)")
    args = parser.parse_args()
    if args.folder is None:
        parser.error("give FOLDER or set TORCHLINT_REALCODE to the folder ../shared/realcode/materialize.sh wrote")
    folder: Path = Path(args.folder).resolve()
    truth_file = folder / "TRUE.json"
    truth = json.loads(truth_file.read_text()) if truth_file.exists() else []
    extra = ROOT / "tests" / "realcode_true_extra.json"  # real bugs of the dev set found after its TRUE.json
    dev_set = os.environ.get("TORCHLINT_REALCODE")
    if dev_set and folder == Path(dev_set).resolve() and extra.exists():
        truth += json.loads(extra.read_text())
    true_keys = {(t["path"], t["line"], t["code"]) for t in truth}

    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "torchlint", "--isolated", "--no-cache", "--exit-zero", "--format", "json", "."],
        cwd=folder, capture_output=True, text=True,
    )
    wall = time.perf_counter() - start
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        return 2
    found = json.loads(out.stdout)
    files = sum(1 for p in folder.rglob("*") if p.suffix in (".py", ".ipynb"))

    per_rule: Counter[tuple[str, bool]] = Counter()
    got = set()
    for d in found:
        key = (Path(d["path"]).as_posix().removeprefix("./"), d["line"], d["code"])
        got.add(key)
        ok = key in true_keys
        per_rule[(d["code"], ok)] += 1
        if not ok:
            print(f"  false? {key[0]}:{key[1]}: {d['code']} {d['message'][:110]}")
    print(f"\n{folder.name}: {len(found)} findings in {files} files, {wall:.2f} s cold")
    print(f"{'rule':6} {'true':>5} {'false':>5}")
    for code in sorted({c for c, _ in per_rule}):
        print(f"{code:6} {per_rule[(code, True)]:5} {per_rule[(code, False)]:5}")
    true_found = sum(per_rule[(c, True)] for c, _ in per_rule)
    precision = true_found / len(found) if found else 1.0
    recall = len(got & true_keys) / len(true_keys) if true_keys else 1.0
    print(f"precision {precision:.0%} ({true_found}/{len(found)}), recall of TRUE.json {recall:.0%}"
          f" ({len(got & true_keys)}/{len(true_keys)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
