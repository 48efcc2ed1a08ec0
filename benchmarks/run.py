"""Speed benchmark: torchlint against parsing floors, flake8, and the peers, on the same files.

    python benchmarks/run.py [--peers-bin DIR] [--synthetic N] [--sample N] [--repeat N] [--only CORPUS] [--skip-flake8]

Builds two corpora under benchmarks/.corpus/ (git-ignored):
- torch: every .py file of the installed torch package (a real monorepo; most files hold no training loop);
- synthetic: N generated training scripts, every one of which passes the prefilter (the worst case).
Then measures, each in a fresh process: `ast.parse` and `libcst.parse_module` of every file (floors), torchlint
cold (no cache) with the default jobs and with --jobs 1, torchlint warm (cache primed), flake8 without and with
the torchlint plugin, and the peers (TorchFix, torch-preflight) on a sample of files, projected to the corpus.
Prints wall time, files/s, peak RSS and CPU seconds for each, and the ratios the targets in docs/performance.md
are about (of wall times; the ratio of CPU seconds beside them).
Each command runs `--repeat` times (default 3) and its fastest run counts, floors and torchlint alike, as timeit
does: on a shared machine the slower runs measure the neighbours. The floors and the cold runs are measured in
rounds (one of each per round), and their ratios are also given per round (median and range).
It prints figures; it never fails on them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / ".corpus"
PY = sys.executable


def measure(cmd: list[str], cwd: Path | None = None) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MB, largest process of the tree) and CPU seconds (user and system, every process of
    the tree) of a command, run in a fresh helper."""
    helper = (
        "import json, resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "wall = time.perf_counter() - t\n"
        "use = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(json.dumps([wall, use.ru_maxrss / 1024, use.ru_utime + use.ru_stime]))\n"
    )
    out = subprocess.run([PY, "-c", helper, *cmd], capture_output=True, text=True, cwd=cwd, check=True)
    wall, rss, cpu = json.loads(out.stdout)
    return wall, rss, cpu


def build_torch_corpus() -> Path:
    dest = CORPUS / "torch"
    if dest.exists():
        return dest
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        sys.exit("torch is not installed: pip install torch==2.13.0 (the CPU wheel), then rerun")
    src = Path(spec.origin).parent
    for path in src.rglob("*.py"):
        target = dest / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return dest


TEMPLATES = [
    """
    def train_{i}(model, loader, optimizer, scheduler, accum={k}):
        running = 0.0
        for step, (x, y) in enumerate(loader):
            out = model(x)
            loss = criterion(out, y) / accum
            loss.backward()
            if (step + 1) % accum == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            running += loss.item()
        return running
    """,
    """
    class Trainer{i}:
        def __init__(self, model):
            self.model = model
            self.optimizer = torch.optim.AdamW(model.parameters(), lr={lr})
            self.scaler = torch.amp.GradScaler("cuda")

        def fit(self, loader):
            for epoch in range({k}):
                for batch in loader:
                    with torch.autocast("cuda"):
                        loss = self.model(batch).loss
                    self.scaler.scale(loss).backward()
                    self.scaler.unscale_(self.optimizer)
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
                    self.optimizer.zero_grad(set_to_none=True)

        @torch.no_grad()
        def evaluate(self, loader):
            total = 0.0
            for batch in loader:
                total += self.model(batch).loss.item()
            return total / len(loader)
    """,
    """
    total_loss_{i} = 0
    for i, (x, y) in enumerate(loader):
        total_loss_{i} = total_loss_{i} + criterion(net(x), y)
        if (i + 1) % {k} == 0:
            total_loss_{i}.backward()
            opt.step()
            opt.zero_grad()
    """,
    """
    def gan_{i}(netG, netD, loader, optimizerG, optimizerD):
        for real in loader:
            netD.zero_grad()
            fake = netG(torch.randn(len(real), {k}))
            errD = bce(netD(real), ones) + bce(netD(fake.detach()), zeros)
            errD.backward()
            optimizerD.step()
            netG.zero_grad()
            errG = bce(netD(fake), ones)
            errG.backward()
            optimizerG.step()
    """,
]


def build_synthetic_corpus(n: int) -> Path:
    dest = CORPUS / f"synthetic-{n}"
    if dest.exists():
        return dest
    rng = random.Random(0)
    for f in range(n):
        parts = ["import torch\nimport torch.nn.functional as F\n"]
        for j in range(rng.randint(6, 14)):
            template = rng.choice(TEMPLATES)
            parts.append(textwrap.dedent(template).format(i=f"{f}_{j}", k=rng.randint(2, 8), lr=rng.choice([1e-3, 3e-4])))
            parts.append(f"\n\ndef helper_{f}_{j}(xs):\n    return [x * {j} for x in xs if x]\n")
        path = dest / f"pkg{f % 10}" / f"train_{f}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(parts), encoding="utf-8")
    return dest


FLOOR = """
import sys, pathlib
from multiprocessing import Pool
kind, jobs, root = sys.argv[1], int(sys.argv[2]), sys.argv[3]
files = sorted(pathlib.Path(root).rglob("*.py"))

def parse(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        if kind == "ast":
            import ast
            ast.parse(text)
        else:
            import libcst
            libcst.parse_module(text)
    except Exception:
        pass

if __name__ == "__main__":
    if jobs == 1:
        for f in files:
            parse(f)
    else:
        with Pool(jobs) as pool:
            pool.map(parse, files, chunksize=8)
"""


def flake8_venv() -> Path:
    """A virtualenv with flake8 alone: flake8 runs every installed plugin, so "plain" must not have ours."""
    venv = CORPUS / "venv-flake8"
    if not (venv / "bin" / "flake8").exists():
        subprocess.run([PY, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "flake8"], check=True)
    return venv / "bin" / "flake8"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--peers-bin", type=Path, help="bin/ of a virtualenv with torchfix and torch-preflight")
    p.add_argument("--synthetic", type=int, default=300, help="number of generated training scripts")
    p.add_argument("--sample", type=int, default=40, help="files given to each peer (projected to the corpus)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each command; the fastest counts")
    p.add_argument("--only", choices=("torch", "synthetic"), help="measure one corpus only (its ratios alone)")
    p.add_argument("--skip-flake8", action="store_true")
    args = p.parse_args()
    jobs = os.cpu_count() or 1
    rows: list[tuple[str, str, int, float, float]] = []

    rounds: dict[str, list[tuple[float, float, float]]] = {}
    cpus: dict[str, float] = {}  # the least CPU seconds of each command's runs

    def report(corpus: str, name: str, nfiles: int, runs: list[tuple[float, float, float]], key: str = "") -> float:
        wall, rss, _ = min(runs)
        cpu = min(r[2] for r in runs)
        if key:
            cpus[key] = cpu
        rows.append((corpus, name, nfiles, wall, rss))
        print(f"{corpus:10} {name:44} {wall:8.2f} s {nfiles / wall:9.1f} files/s {rss:8.0f} MB {cpu:8.2f} s CPU", flush=True)
        return wall

    def record(corpus: str, name: str, nfiles: int, cmd: list[str], cwd: Path | None = None) -> float:
        return report(corpus, name, nfiles, [measure(cmd, cwd) for _ in range(max(1, args.repeat))])

    def per_round(a: str, b: str) -> str:
        """The median and range of a/b over the rounds in which both were measured, and the ratio of their CPU
        seconds (every process; steadier than wall time where neighbours take the machine's cores by turns)."""
        ratios = sorted(x[0] / y[0] for x, y in zip(rounds.get(a, []), rounds.get(b, [])))
        if not ratios:
            return ""
        return (f"; per round: median {statistics.median(ratios):.2f}x, {ratios[0]:.2f}x-{ratios[-1]:.2f}x"
                f"; CPU seconds {cpus[a] / cpus[b]:.2f}x")

    floor = CORPUS / "floor.py"
    CORPUS.mkdir(exist_ok=True)
    floor.write_text(FLOOR)
    results: dict[str, float] = {}
    corpora = {"torch": build_torch_corpus, "synthetic": lambda: build_synthetic_corpus(args.synthetic)}
    corpora = {label: build() for label, build in corpora.items() if args.only in (None, label)}
    for label, root in corpora.items():
        files = sorted(root.rglob("*.py"))
        n = len(files)
        # The corpus sits in a git-ignored folder: tell torchlint to check it anyway.
        tl = [PY, "-m", "torchlint", "--isolated", "--exit-zero", "-q", "--no-respect-gitignore"]
        seen = subprocess.run(tl[:-2] + ["--no-respect-gitignore", "--no-cache", "--select", "TL001", str(root)],
                              capture_output=True, text=True).stdout.strip().splitlines()[-1]
        if f"({n} files)" not in seen and f"in {n} files" not in seen:
            sys.exit(f"torchlint did not see the {n} files of {root}: {seen}")
        # The floors and the cold runs are measured in rounds, one of each per round: the machine's load drifts
        # over minutes, and each ratio is also given as the median of its rounds' own ratios.
        paired = {
            "ast": ("ast.parse, every file (1 process)", [PY, str(floor), "ast", "1", str(root)]),
            "cst1": ("libcst.parse_module, every file (1 process)", [PY, str(floor), "cst", "1", str(root)]),
            "cst": (f"libcst.parse_module, every file ({jobs} processes)", [PY, str(floor), "cst", str(jobs), str(root)]),
            "cold": (f"torchlint cold (--no-cache, {jobs} jobs)", tl + ["--no-cache", str(root)]),
            "cold1": ("torchlint cold (--no-cache, --jobs 1)", tl + ["--no-cache", "--jobs", "1", str(root)]),
        }
        for key, (name, cmd) in paired.items():
            rounds[f"{label}/{key}"] = []
        for _ in range(max(1, args.repeat)):
            for key, (name, cmd) in paired.items():
                rounds[f"{label}/{key}"].append(measure(cmd))
        for key, (name, cmd) in paired.items():
            results[f"{label}/{key}"] = report(label, name, n, rounds[f"{label}/{key}"], f"{label}/{key}")
        cache_home = CORPUS / f"cache-{label}"
        shutil.rmtree(cache_home, ignore_errors=True)
        cache_home.mkdir()
        measure(tl + [str(root)], cwd=cache_home)  # prime the cache
        results[f"{label}/warm"] = record(label, "torchlint warm (cache primed)", n, tl + [str(root)], cwd=cache_home)
        if not args.skip_flake8 and label == "torch":
            plain = flake8_venv()
            results["torch/flake8"] = record(label, "flake8 (default checks, no torchlint)", n, [str(plain), "--exit-zero", str(root)])
            results["torch/flake8tl"] = record(label, "flake8 --select TL,E,F,W (with torchlint)", n,
                                               [PY, "-m", "flake8", "--exit-zero", "--select", "TL,E,F,W", str(root)])
        if args.peers_bin is not None:
            sample = random.Random(1).sample(files, min(args.sample, n))
            sample_dir = CORPUS / f"sample-{label}"
            shutil.rmtree(sample_dir, ignore_errors=True)
            for i, f in enumerate(sample):
                (sample_dir / f"f{i}").mkdir(parents=True)
                shutil.copyfile(f, sample_dir / f"f{i}" / f.name)
            for peer, cmd in (
                ("torchfix", [str(args.peers_bin / "torchfix"), "--select", "ALL", str(sample_dir)]),
                ("torch-preflight", [str(args.peers_bin / "torch-preflight"), "check", "-q", str(sample_dir)]),
            ):
                if not Path(cmd[0]).exists():
                    continue
                wall = record(label, f"{peer} on {len(sample)} sampled files", len(sample), cmd)
                results[f"{label}/{peer}"] = wall * n / len(sample)
                print(f"{'':10} {'  projected to all ' + str(n) + ' files':44} {results[f'{label}/{peer}']:8.1f} s")
    print("\nRatios (targets in docs/performance.md):")
    t = results
    if "torch/cold" in t:
        print(f"  torch: torchlint cold / ast.parse floor          {t['torch/cold'] / t['torch/ast']:.2f}x  (target <= 1.0)"
              f"{per_round('torch/cold', 'torch/ast')}")
        print(f"  torch: torchlint cold / libcst parse floor       {t['torch/cold'] / t['torch/cst']:.2f}x")
    if "torch/torchfix" in t:
        print(f"  torch: TorchFix (projected) / torchlint cold     {t['torch/torchfix'] / t['torch/cold']:.0f}x  (target > 100)")
    if "torch/torch-preflight" in t:
        print(f"  torch: torch-preflight (projected) / torchlint   {t['torch/torch-preflight'] / t['torch/cold']:.0f}x")
    if "synthetic/cold" in t:
        print(f"  synthetic: torchlint cold / libcst parse floor   {t['synthetic/cold'] / t['synthetic/cst']:.2f}x  (target <= 1.6)"
              f"{per_round('synthetic/cold', 'synthetic/cst')}")
        print(f"  synthetic: --jobs 1 / libcst floor (1 process)   {t['synthetic/cold1'] / t['synthetic/cst1']:.2f}x"
              f"{per_round('synthetic/cold1', 'synthetic/cst1')}")
    if "torch/warm" in t:
        print(f"  torch: warm / cold                               {t['torch/warm'] / t['torch/cold']:.2f}   (target <= 0.10)")
    if "synthetic/warm" in t:
        print(f"  synthetic: warm / cold                           {t['synthetic/warm'] / t['synthetic/cold']:.2f}   (target <= 0.10)")
    if "torch/flake8" in t:
        print(f"  torch: flake8 with torchlint / plain flake8      {t['torch/flake8tl'] / t['torch/flake8']:.2f}x  (target <= 1.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
