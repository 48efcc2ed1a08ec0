"""Instructions, not seconds: the synthetic corpus's ratio counted with valgrind, where timings cannot be trusted.

    python benchmarks/instructions.py [--files N] [--against DIR]

On a shared machine one command's wall time varies by a third from minute to minute, and a ratio of two timings
more still. The instructions a process executes do not depend on its neighbours: this runs, under valgrind's
cachegrind (no cache simulation), `libcst.parse_module` of the first N files of the synthetic corpus (the floor of
benchmarks/run.py, validation included) and torchlint's `lint_source` of the same files in one process, each
minus the same process doing only its imports, and prints the two counts and their ratio. `--against DIR` counts
another checkout of torchlint too (a git worktree of an earlier commit), for a before/after on the same files.
Instructions are a proxy: an instruction that misses the cache costs more than one that hits. It prints figures;
it never fails on them. Needs `valgrind` (apt-get install valgrind).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

PROGRAM = """
import sys, pathlib
mode, n, root = sys.argv[1], int(sys.argv[2]), sys.argv[3]
files = [(str(f), f.read_text()) for f in sorted(pathlib.Path(root).rglob("*.py"))][:n]
if mode.startswith("floor"):
    import libcst
    if mode == "floor":
        for _, text in files:
            libcst.parse_module(text)
else:
    from torchlint.engine import lint_source
    from torchlint.rules import ALL_RULES
    from torchlint.source.cstfast import enable
    enable()  # as torchlint's worker processes do
    if mode == "torchlint":
        for path, text in files:
            lint_source(text, path, ALL_RULES)
"""


def count(mode: str, n: int, corpus: Path, source: Path) -> int:
    """Instructions executed by the program in `mode`, with torchlint imported from `source`."""
    env = dict(os.environ, PYTHONPATH=str(source))
    out = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         sys.executable, "-c", PROGRAM, mode, str(n), str(corpus)],
        capture_output=True, text=True, env=env, cwd="/", check=True,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if found is None:
        sys.exit(f"no instruction count in valgrind's output:\n{out.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=30, help="files of the synthetic corpus counted")
    p.add_argument("--synthetic", type=int, default=300, help="size of the synthetic corpus (as benchmarks/run.py)")
    p.add_argument("--against", type=Path, help="another checkout of torchlint to count the same way")
    args = p.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed: apt-get install valgrind")
    sys.path.insert(0, str(HERE))
    from run import build_synthetic_corpus

    corpus = build_synthetic_corpus(args.synthetic)
    floor = count("floor", args.files, corpus, ROOT) - count("floor-imports", args.files, corpus, ROOT)
    print(f"libcst.parse_module, {args.files} files: {floor / 1e9:.3f} G instructions")
    for label, source in (("this checkout", ROOT), ("--against", args.against)):
        if source is None:
            continue
        work = count("torchlint", args.files, corpus, source) - count("torchlint-imports", args.files, corpus, source)
        print(f"torchlint lint_source ({label}: {source}): {work / 1e9:.3f} G instructions, "
              f"{work / floor:.3f}x the libcst floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
