"""Overhead of `torchlint run`'s runtime monitor on a small CPU model (issue 12's target: at most 2x per step).

    python benchmarks/monitor.py [--steps N]

Writes a training script (an MLP, batch 32, N steps, zero_grad/backward/step), runs it plainly and under the
monitor (torchlint.verify.monitor, with every hook on), each three times in a fresh process, and prints the best
seconds per step of each. The script times its own loop, so interpreter start-up and the torch import are not
counted. It prints figures; it never fails on them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """\
    import json, sys, time
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = [(torch.randn(32, 64), torch.randint(0, 10, (32,))) for _ in range(16)]
    steps = int(sys.argv[1])
    start = time.perf_counter()
    for i in range(steps):
        x, y = data[i % len(data)]
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    with open(sys.argv[2], "w") as fh:
        json.dump((time.perf_counter() - start) / steps, fh)
    """
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="torchlint-monitor-bench-") as tmp:
        script, out = Path(tmp) / "train.py", Path(tmp) / "t.json"
        script.write_text(SCRIPT)
        n = str(args.steps)
        plain = [sys.executable, str(script), n, str(out)]
        monitored = [sys.executable, "-m", "torchlint.verify.monitor", "--steps", str(args.steps + 1),
                     "--out", str(Path(tmp) / "record.json"), str(script), n, str(out)]
        best = {}
        for label, cmd in (("plain", plain), ("monitored", monitored)):
            times = []
            for _ in range(3):
                subprocess.run(cmd, check=True, capture_output=True)
                times.append(json.loads(out.read_text()))
            best[label] = min(times)
            print(f"{label:10} {best[label] * 1e3:8.3f} ms per step (best of 3, {args.steps} steps)")
        print(f"overhead   {best['monitored'] / best['plain']:.2f}x  (target <= 2.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
