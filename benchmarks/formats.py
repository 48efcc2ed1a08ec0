"""Per-format cost: torchlint on one 20,000-line file (300 findings, each with a fix) in every output format.

    python benchmarks/formats.py

JSON and SARIF carry each fix's text edits; they must stay close to the text format (target: json within
1.5x of text, issue 14). Each format runs three times in a fresh process, no cache; the best time is printed.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.test_consistency import _big_file  # noqa: E402  the same file the consistency test builds


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.py"
        path.write_text(_big_file(every=25), encoding="utf-8")
        times = {}
        for fmt in ("text", "json", "sarif", "github"):
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                subprocess.run([sys.executable, "-m", "torchlint", "--isolated", "--no-cache", "--exit-zero",
                                "--format", fmt, str(path)], capture_output=True, check=True)
                best = min(best, time.perf_counter() - start)
            times[fmt] = best
            print(f"{fmt:7} {best:6.2f} s  ({best / times['text']:.2f}x text)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
