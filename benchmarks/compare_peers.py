"""Detection compared with the peers on the same files: torchlint, torch-preflight, TorchFix.

Runs each tool on the bundled fixtures (every `bad.py` holds exactly one known mistake; `fixed.py` and
`reference.py` are correct) and on tests/corpus/correct/ (correct code in the styles people write), and prints
per rule whether each tool reports it, and how many correct files each tool flags.

    python benchmarks/compare_peers.py [--peers-bin DIR]

The peers are found on PATH or in --peers-bin (a virtualenv's bin/ with `pip install torchfix torch-preflight`;
keep them out of the environment you time flake8 in: TorchFix registers a flake8 plugin).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Peer rule codes that target the same mistake as a torchlint rule (from the peers' own rule lists).
EQUIVALENT = {
    "torch-preflight": {"TG003": "TL004", "TG014": "TL005", "TG001": "TL007"},
    "torchfix": {},
}


def torchlint(files: list[Path], _bin: Path | None) -> list[tuple[str, str]]:
    out = subprocess.run([sys.executable, "-m", "torchlint", "--isolated", "--no-cache", "--format", "json", *map(str, files)],
                         capture_output=True, text=True, cwd=ROOT)
    return [(d["path"], d["code"]) for d in json.loads(out.stdout)]


def preflight(files: list[Path], bin_dir: Path | None) -> list[tuple[str, str]]:
    exe = _find("torch-preflight", bin_dir)
    out = subprocess.run([exe, "check", "-f", "json", "--no-color", *map(str, files)], capture_output=True, text=True, cwd=ROOT)
    return [(d["path"], d["code"]) for d in json.loads(out.stdout)["diagnostics"]]


def torchfix(files: list[Path], bin_dir: Path | None) -> list[tuple[str, str]]:
    exe = _find("torchfix", bin_dir)
    out = subprocess.run([exe, "--select", "ALL", *map(str, files)], capture_output=True, text=True, cwd=ROOT)
    found = []
    for line in out.stdout.splitlines():
        parts = line.split(":", 3)
        if len(parts) == 4 and parts[3].strip().startswith("TOR"):
            found.append((parts[0], parts[3].split()[0]))
    return found


def _find(name: str, bin_dir: Path | None) -> str:
    if bin_dir is not None and (bin_dir / name).exists():
        return str(bin_dir / name)
    exe = shutil.which(name)
    if exe is None:
        raise FileNotFoundError(name)
    return exe


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--peers-bin", type=Path)
    args = p.parse_args()
    bad = sorted(ROOT.glob("fixtures/TL*/*/bad.py"))
    # The references of the safe fixes (TL002, TL007) are the original buggy scripts: not correct code.
    references = [r for r in sorted(ROOT.glob("fixtures/TL*/*/reference.py")) if r.parent.parent.name not in ("TL002", "TL007")]
    clean = sorted(ROOT.glob("fixtures/TL*/*/fixed.py")) + references
    clean += sorted(ROOT.glob("tests/corpus/correct/*.py"))
    rel = lambda p: str(p.relative_to(ROOT))  # noqa: E731
    tools = {"torchlint": torchlint, "torch-preflight": preflight, "torchfix": torchfix}
    rows: dict[str, dict[str, str]] = defaultdict(dict)
    flagged_clean: dict[str, int] = {}
    for name, run in tools.items():
        try:
            found = run([Path(rel(f)) for f in bad + clean], args.peers_bin)
        except FileNotFoundError as exc:
            print(f"{name}: not installed ({exc}); pip install torchfix torch-preflight", file=sys.stderr)
            continue
        mapping = EQUIVALENT.get(name)
        by_file = defaultdict(set)
        for path, code in found:
            code = code if mapping is None else mapping.get(code, "")
            if code:
                by_file[path].add(code)
        for f in bad:
            rule = f.parent.parent.name
            scenario = f"{rule}/{f.parent.name}"
            if mapping is not None and rule not in mapping.values():
                rows[scenario][name] = "no rule"
            else:
                rows[scenario][name] = "found" if rule in by_file.get(rel(f), set()) else "missed"
        flagged_clean[name] = sum(1 for f in clean if by_file.get(rel(f)))
    names = [n for n in tools if n in flagged_clean]
    print("| scenario (bad.py) | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for scenario, cells in rows.items():
        print(f"| {scenario} | " + " | ".join(cells.get(n, "") for n in names) + " |")
    total = len(rows)
    print("| **found** | " + " | ".join(f"**{sum(1 for c in rows.values() if c.get(n) == 'found')}/{total}**" for n in names) + " |")
    print(f"| **correct files flagged** (of {len(clean)}) | " + " | ".join(f"**{flagged_clean[n]}**" for n in names) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
