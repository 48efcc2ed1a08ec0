"""Incremental re-analysis with project analysis: after one file changes, only that file and the files whose
results read it are analysed again; every other result comes from the cache.

    python benchmarks/incremental.py [FOLDER]     # default: $TORCHLINT_REALCODE, the materialized dev set

Copies FOLDER (one sub-folder per repository, each its own project) to a temporary directory, checks it once
cold and once warm, then, for each repository, appends a comment to the file that the most other files read and
checks again. Prints, per change: the files re-analysed (and that they are exactly the changed file plus the files
whose analysis looked at it: resolved an import to it, even when nothing there turned out to matter, since a change
can make it matter), and the wall time of the cold, warm and incremental runs (one process). It prints figures; it
never fails on them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from torchlint.batch import Job, run  # noqa: E402
from torchlint.cache import CACHE_DIR  # noqa: E402
from torchlint.files import discover  # noqa: E402
from torchlint.config import Config  # noqa: E402
from torchlint.notebook import NotebookError, join, load  # noqa: E402
from torchlint.rules import ALL_RULES  # noqa: E402


def check(repo: Path, files: list[Path]) -> tuple[dict[str, bool], float]:
    codes = tuple(r.code for r in ALL_RULES)
    jobs = [Job(str(f), codes, project=str(repo)) for f in files]
    start = time.perf_counter()
    outcomes = {Path(o.path).relative_to(repo).as_posix(): o.cached for o in run(jobs, 1, repo)}
    return outcomes, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=os.environ.get("TORCHLINT_REALCODE"),
                        help="default: $TORCHLINT_REALCODE (../shared/realcode/materialize.sh writes it)")
    args = parser.parse_args()
    if args.folder is None:
        parser.error("give FOLDER or set TORCHLINT_REALCODE to the folder ../shared/realcode/materialize.sh wrote")
    args.folder = Path(args.folder)
    with tempfile.TemporaryDirectory(prefix="torchlint-incremental-") as tmp:
        total = Counter()
        for src in sorted(p for p in args.folder.iterdir() if p.is_dir()):
            repo = Path(tmp) / src.name
            shutil.copytree(src, repo, ignore=shutil.ignore_patterns(CACHE_DIR))
            files = [Path(f) for f in discover([str(repo)], Config(root=repo))]
            cold_outcomes, cold = check(repo, files)
            _, warm = check(repo, files)
            # the file the most other files' views looked at
            from torchlint.project import Project

            project = Project(repo)
            looked: Counter[str] = Counter()
            for f in files:
                text = f.read_text(encoding="utf-8", errors="replace")
                if f.suffix == ".ipynb":
                    try:
                        text = join(load(text)).text  # a notebook's cells, as the engine reads them
                    except NotebookError:
                        continue
                project.view(f, text)
            for reads in project.reads.values():  # the files read, not those looked for and missing
                looked.update(shown for shown, path in reads.items() if path.is_file())
            if not looked:
                print(f"{src.name}: {len(files)} files, cold {cold:.2f} s, warm {warm:.2f} s; no file reads another")
                continue
            changed, n_readers = looked.most_common(1)[0]
            target = repo / changed
            target.write_text(target.read_text(encoding="utf-8") + "\n# changed\n", encoding="utf-8")
            outcomes, incremental = check(repo, files)
            again = sorted(name for name, cached in outcomes.items() if not cached)
            expected = {changed} | {
                Path(f).relative_to(repo).as_posix() for f, reads in project.reads.items() if changed in reads
            }
            exact = set(again) == {e for e in expected if e in outcomes}
            total.update(files=len(files), again=len(again))
            print(f"{src.name}: {len(files)} files, cold {cold:.2f} s, warm {warm:.2f} s; changed {changed} "
                  f"(looked at by {n_readers}): {len(again)} re-analysed in {incremental:.2f} s "
                  f"({'exactly it and its readers' if exact else 'MISMATCH: ' + ', '.join(again)})")
        print(f"\nall: {total['again']} of {total['files']} files re-analysed over the changes above")
    return 0


if __name__ == "__main__":
    sys.exit(main())
