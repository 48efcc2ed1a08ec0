"""Writes each mined bug of benchmarks/mined/cases.json as its repository at the buggy commit, for
benchmarks/realbugs.py and tests/test_realbugs.py (TORCHLINT_MINED).

    python benchmarks/mined/materialize.py OUT [--mirrors DIR]     # DIR: the folder `fetch` fills (/work/.mirror)

Each case's repository (`fetch github:OWNER/NAME` first) is read from DIR/<owner+name>/, and its .py and .ipynb
files and licence at the case's commit go into OUT/<id>/; OUT/cases.json is a copy of the manifest. Only the
manifest (facts: repository, commit, path, lines, rule, report) is kept in the project, never the code.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
KEPT = re.compile(r"\.(py|ipynb)$|^(LICENSE|LICENCE|COPYING)[^/]*$")


def git_dir(mirrors: Path, repo: str) -> Path | None:
    base = mirrors / repo.replace("/", "+")
    for candidate in (base / "repo", base / "repo" / ".git", base):
        if (candidate / "objects").is_dir():
            return candidate
    return None


def write_case(git: Path, commit: str, out: Path) -> int:
    names = subprocess.run(["git", "--git-dir", str(git), "ls-tree", "-r", "--name-only", commit],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    if out.exists():
        shutil.rmtree(out)
    written = 0
    for name in names:
        if not KEPT.search(name):
            continue
        blob = subprocess.run(["git", "--git-dir", str(git), "show", f"{commit}:{name}"], capture_output=True)
        if blob.returncode != 0:
            continue
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob.stdout)
        written += 1
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--cases", type=Path, default=HERE / "cases.json")
    args = parser.parse_args()
    cases = json.loads(args.cases.read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(args.cases, args.out / "cases.json")
    missing = 0
    for case in cases:
        git = git_dir(args.mirrors, case["repo"])
        if git is None:
            print(f"{case['id']}: no snapshot of {case['repo']}: fetch github:{case['repo']}", file=sys.stderr)
            missing += 1
            continue
        count = write_case(git, case["commit"], args.out / case["id"])
        print(f"{case['id']} {case['repo']}: {count} files")
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
