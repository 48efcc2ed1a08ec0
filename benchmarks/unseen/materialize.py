"""Writes the repositories of an unseen set (benchmarks/unseen/<set>/repos.txt: `owner/name COMMIT` per line) at
their pinned commits, for benchmarks/realcode_wide.py, which judges each finding against the set's TRUE.json and
FALSE.json (every finding read and judged when the set was linted for issue 27).

    python benchmarks/unseen/materialize.py SET OUT [--mirrors DIR]    # then: realcode_wide.py OUT

Each repository (`fetch github:OWNER/NAME` first) goes into OUT/<owner+name>/ (.py, .ipynb, licence); the set's
TRUE.json and FALSE.json are copied beside them. Only these manifests are kept in the project, never the code.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "mined"))
from materialize import git_dir, write_case  # noqa: E402  (benchmarks/mined/materialize.py)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set", choices=sorted(p.name for p in HERE.iterdir() if (p / "repos.txt").exists()))
    parser.add_argument("out", type=Path)
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    args = parser.parse_args()
    folder = HERE / args.set
    args.out.mkdir(parents=True, exist_ok=True)
    for name in ("TRUE.json", "FALSE.json"):
        shutil.copyfile(folder / name, args.out / name)
    missing = 0
    for line in (folder / "repos.txt").read_text().splitlines():
        if not line.strip():
            continue
        repo, commit = line.split()[:2]
        git = git_dir(args.mirrors, repo)
        if git is None:
            print(f"no snapshot of {repo}: fetch github:{repo}", file=sys.stderr)
            missing += 1
            continue
        print(f"{repo}: {write_case(git, commit, args.out / repo.replace('/', '+'))} files")
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
