"""Two shapes that must cost time linear in their size: a chain of N `loss = loss + ...` assignments in one
training loop (reaching definitions followed through each accumulation), and a module of N lines made of small
training functions that each get a finding (positions of many statements of a long file).

    python benchmarks/scaling.py [--chain N] [--lines N] [--repeat R]

Each shape is generated at N and 4N and checked by `torchlint --isolated --no-cache --file-timeout 0` (no time
limit) in a fresh process, the best of R runs. Prints the times, the ratio, and whether 4x the size costs at most
5x the time. It prints figures; it never fails on them, and CI does not run it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHAIN_HEAD = '''import torch


def train(model, data, optimizer, criterion):
    for x, y in data:
        optimizer.zero_grad()
        out = model(x)
        loss = criterion(out, y)
'''
_CHAIN_TAIL = '''        loss.backward()
        optimizer.step()
'''

# One TL001 finding per function (a running total never rebound after its backward): 12 lines.
_FUNCTION = '''def train_{i}(model, data, optimizer, k):
    total = 0
    for i, (x, y) in enumerate(data):
        total += F.mse_loss(model(x), y)
        if (i + 1) % k == 0:
            (total / k).backward()
            optimizer.step()
            optimizer.zero_grad()


'''


def chain(n: int) -> str:
    """A training loop whose loss is built by `n` accumulations, each reading the previous definition."""
    steps = "".join(f"        loss = loss + 0.{i % 9 + 1} * out[{i}].sum()\n" for i in range(n))
    return _CHAIN_HEAD + steps + _CHAIN_TAIL


def many_findings(lines: int) -> str:
    """About `lines` lines of small training functions, each with one finding."""
    head = "import torch\nimport torch.nn.functional as F\n\n\n"
    count = max(1, (lines - 4) // _FUNCTION.count("\n"))
    return head + "".join(_FUNCTION.format(i=i) for i in range(count))


def check(text: str, repeat: int) -> tuple[float, int]:
    """Best wall time of `repeat` runs of torchlint over `text`, and the number of findings it reported."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory(prefix="torchlint-scaling-") as tmp:
        path = Path(tmp) / "case.py"
        path.write_text(text, encoding="utf-8")
        best, found = float("inf"), 0
        for _ in range(repeat):
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "torchlint", "--isolated", "--no-cache", "--file-timeout", "0",
                 "--format", "text", "--exit-zero", str(path)],
                cwd=tmp, env=env, capture_output=True, text=True,
            )
            best = min(best, time.perf_counter() - start)
            if done.returncode != 0:
                raise SystemExit(f"torchlint failed ({done.returncode}): {done.stderr.strip()[-500:]}")
            found = sum(1 for line in done.stdout.splitlines() if ": TL" in line)
        return best, found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chain", type=int, default=5000, help="assignments in the small chain (default 5000)")
    parser.add_argument("--lines", type=int, default=10000, help="lines of the small module (default 10000)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per case, the best one counts (default 1)")
    args = parser.parse_args()
    shapes = [
        (f"chain of loss = loss + ...", "assignments", chain, args.chain),
        (f"module with a finding per 12 lines", "lines", many_findings, args.lines),
    ]
    linear = True
    for title, unit, generate, n in shapes:
        (small, found_small), (big, found_big) = (check(generate(size), args.repeat) for size in (n, 4 * n))
        ratio = big / small
        ok = ratio <= 5.0
        linear &= ok
        print(f"{title}: {n:,} {unit} {small:.2f} s ({found_small} findings), {4 * n:,} {unit} {big:.2f} s "
              f"({found_big} findings): {ratio:.2f}x the time for 4x the size, "
              f"{'at most 5x: linear' if ok else 'MORE than 5x: superlinear'}")
    print("both linear" if linear else "not linear")
    return 0


if __name__ == "__main__":
    sys.exit(main())
