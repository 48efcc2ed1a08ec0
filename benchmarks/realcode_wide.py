"""Precision on many repositories, each linted from its own root: findings judged against TRUE.json and FALSE.json.

    python benchmarks/realcode_wide.py FOLDER [--jobs N] [--only NAME ...]

FOLDER holds one sub-folder per repository (`owner+name`, as ../shared/realcode-wide/materialize.sh writes them);
TRUE.json and FALSE.json are read from FOLDER or, when absent there, from ../shared/realcode-wide/. Each repository is
linted from its root with `--isolated --no-cache`, as its users would run it. Every finding is printed as real (in
TRUE.json), false (in FALSE.json) or NEW (in neither: read it and judge it), then the counts per rule, the precision
over the judged findings, and the TRUE.json findings not reported. Notices (TL9xx: a file that does not parse or timed
out) are counted apart, never judged.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "realcode-wide"
JUDGED = Path(__file__).resolve().parent / "realcode_wide_judged.json"


def _judged(folder: Path, name: str) -> list[dict]:
    """The findings judged real (TRUE.json) or false (FALSE.json): the folder's own file, else the shared set's, and
    for the shared set also the verdicts this project gave since on findings in neither (realcode_wide_judged.json,
    `verdict` "real" or "false")."""
    found: list[dict] = []
    for place in (folder / name, SHARED / name):
        if place.exists():
            found = json.loads(place.read_text())
            break
    if folder.name == SHARED.name or not (folder / name).exists():
        verdict = "real" if name == "TRUE.json" else "false"
        found += [j for j in json.loads(JUDGED.read_text()) if j["verdict"] == verdict]
    return found


def _lint(repo: Path) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "torchlint", "--isolated", "--no-cache", "--exit-zero", "--jobs", "1",
         "--format", "json", "."],
        cwd=repo, capture_output=True, text=True,
    )
    if out.returncode != 0:
        print(f"  {repo.name}: torchlint exited {out.returncode}: {out.stderr.strip()[:200]}", file=sys.stderr)
        return []
    found = json.loads(out.stdout)
    for d in found:
        d["path"] = f"{repo.name}/{Path(d['path']).as_posix().removeprefix('./')}"
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--jobs", type=int, default=2, help="repositories linted at once (default 2)")
    parser.add_argument("--only", nargs="*", default=None, help="lint only these repositories (owner+name)")
    args = parser.parse_args()
    folder: Path = args.folder.resolve()
    repos = sorted(p for p in folder.iterdir() if p.is_dir() and "+" in p.name)
    if args.only:
        repos = [p for p in repos if p.name in set(args.only)]
    true_keys = {(t["path"], t["line"], t["code"]) for t in _judged(folder, "TRUE.json")}
    false_keys = {(t["path"], t["line"], t["code"]) for t in _judged(folder, "FALSE.json")}

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        linted = [d for batch in pool.map(_lint, repos) for d in batch]
    # TL9xx are notices about the file (it does not parse, it timed out), not findings about training code
    notices = Counter(d["code"] for d in linted if d["code"].startswith("TL9"))
    found = [d for d in linted if not d["code"].startswith("TL9")]

    per_rule: Counter[tuple[str, str]] = Counter()
    got = set()
    for d in sorted(found, key=lambda d: (d["path"], d["line"], d["code"])):
        key = (d["path"], d["line"], d["code"])
        got.add(key)
        verdict = "real" if key in true_keys else "false" if key in false_keys else "NEW"
        per_rule[(d["code"], verdict)] += 1
        print(f"  {verdict:5} {key[0]}:{key[1]}:{d.get('column', 0)}: {d['code']} {d['message'][:100]}")
    print(f"\n{len(repos)} repositories, {len(found)} findings; notices (not judged): "
          + (", ".join(f"{code} {n}" for code, n in sorted(notices.items())) or "none"))
    print(f"{'rule':6} {'real':>5} {'false':>5} {'new':>5}")
    for code in sorted({c for c, _ in per_rule}):
        print(f"{code:6} {per_rule[(code, 'real')]:5} {per_rule[(code, 'false')]:5} {per_rule[(code, 'NEW')]:5}")
    real = sum(n for (_, v), n in per_rule.items() if v == "real")
    false = sum(n for (_, v), n in per_rule.items() if v == "false")
    new = sum(n for (_, v), n in per_rule.items() if v == "NEW")
    if real + false:
        print(f"precision over judged findings {real / (real + false):.0%} ({real}/{real + false}); {new} new to judge")
    names = {p.name for p in repos}
    missed = sorted(k for k in true_keys - got if k[0].split("/", 1)[0] in names and not k[2].startswith("TL9"))
    print(f"TRUE.json findings not reported: {len(missed)}")
    for key in missed:
        print(f"  missed {key[0]}:{key[1]}: {key[2]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
