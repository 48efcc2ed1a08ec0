"""Run training scripts unchanged, with fixed seeds, recording each optimizer step.

A global optimizer step post-hook records, at every step of every optimizer, each parameter's gradient and new
value; a saved-tensors hook counts the autograd buffers alive at each step (what `retain_graph` keeps). Several
scripts run in one process (torch is imported once), each with fresh seeds and a fresh record.

    python -m torchlint.verify.runner --device cpu --out DIR a.py b.py   # writes DIR/0.pt, DIR/1.pt
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import runpy
import sys
import traceback
import subprocess
import weakref
from pathlib import Path
from contextlib import contextmanager
from typing import Iterator, Sequence


def _deterministic(device: str, seed: int) -> None:
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass
    torch.use_deterministic_algorithms(True, warn_only=True)
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = False


class SavedTensor:
    """A tensor autograd saved for backward (through saved_tensors_hooks), with its version when saved."""

    __slots__ = ("tensor", "version", "__weakref__")

    def __init__(self, tensor) -> None:
        # Detached (the same storage and version counter, no grad_fn): a saved output holding itself would make
        # a cycle through its own graph node that no garbage collection frees, so every graph kept by
        # retain_graph=True would stay alive for the rest of the process (and count as the next script's).
        self.tensor = tensor.detach()
        self.version = tensor._version


def unpack(holder: SavedTensor):
    """The saved tensor, checked as PyTorch checks it when no hooks are set (with hooks it does not): a tensor
    modified in place since it was saved fails the backward, so that a script fails here as it fails alone."""
    t = holder.tensor
    if t._version != holder.version:
        raise RuntimeError(
            "one of the variables needed for gradient computation has been modified by an inplace operation: "
            f"[{t.type()} {list(t.shape)}] is at version {t._version}; expected version {holder.version} instead.")
    return t


def reachable(nodes) -> int:
    """How many autograd nodes are reachable from `nodes` (grad_fn objects) through their inputs."""
    return len(_reachable(nodes))


def _reachable(nodes, known: frozenset = frozenset()) -> set:
    seen: set = set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if node is None or node in seen or node in known:
            continue
        seen.add(node)
        stack.extend(fn for fn, _ in node.next_functions)
    return seen


def _live_nodes(torch, known: frozenset = frozenset()) -> set:
    """Autograd nodes reachable from every live tensor, less `known`: what a graph kept across iterations costs."""
    return _reachable((o.grad_fn for o in gc.get_objects() if isinstance(o, torch.Tensor) and o.grad_fn is not None),
                      known)


@contextmanager
def as_main(script: Path, argv: Sequence[str]) -> Iterator[None]:
    """Set up this process as `python SCRIPT ARGV` would: `sys.argv`, and the script's folder first on `sys.path`
    so that it imports its helpers (`from engine import train_step`), freshly for each script (a module of that
    folder imported by an earlier script is forgotten); put both back afterwards."""
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [str(script), *argv]
    sys.path.insert(0, str(script.parent))
    for name, module in list(sys.modules.items()):
        if (file := getattr(module, "__file__", None)) and Path(file).parent == script.parent:
            del sys.modules[name]
    try:
        yield
    finally:
        sys.argv, sys.path[:] = old_argv, old_path


class _Enough(BaseException):
    """Raised from the step hook once `max_steps` steps are recorded: the rest of the script is not needed."""


def record_script(script: Path, device: str, seed: int = 0, count_graph: bool = False, max_steps: int = 0,
                  argv: Sequence[str] = ()) -> dict:
    """Run one script (`python SCRIPT ARGV`) in this process and return its record: steps (grads, params, saved
    tensors alive and, with count_graph, autograd nodes alive) and any error; with `max_steps`, stopped after that
    many steps."""
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    gc.collect()
    # What an earlier script of this process left alive is not this one's graph: only nodes made since count.
    before = frozenset(_live_nodes(torch)) if count_graph else frozenset()
    _deterministic(device, seed)
    steps: list[dict] = []
    alive: list[weakref.ref] = []
    optimizers: list[int] = []

    def pack(t):
        h = SavedTensor(t)
        alive.append(weakref.ref(h))
        return h

    def post_hook(optimizer, args, kwargs) -> None:
        key = id(optimizer)
        if key not in optimizers:
            optimizers.append(key)
        grads, params = [], []
        for group in optimizer.param_groups:
            for p in group["params"]:
                grads.append(None if p.grad is None else p.grad.detach().to("cpu", copy=True))
                params.append(p.detach().to("cpu", copy=True))
        alive[:] = [r for r in alive if r() is not None]
        steps.append({
            "optimizer": optimizers.index(key), "grads": grads, "params": params, "saved": len(alive),
            "saved_bytes": _bytes(r() for r in alive), "graph_nodes": len(_live_nodes(torch, before)) if count_graph else 0,
        })
        if max_steps and len(steps) >= max_steps:
            raise _Enough

    handle = register_optimizer_step_post_hook(post_hook)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    previous = torch.get_default_device()
    torch.set_default_device(device)
    error = None
    try:
        with as_main(script, argv), torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            runpy.run_path(str(script), run_name="__main__")
    except _Enough:
        pass
    except SystemExit as exc:  # `sys.exit(0)` ends a run as its last line would; argparse's exit 2 is a failure
        if exc.code not in (None, 0):
            error = f"SystemExit: {exc.code}"
    except Exception as exc:  # the documented failure of a buggy script is a result, not a crash
        error = f"{type(exc).__name__}: {exc}"
        traceback.print_exc(limit=3)
    finally:
        handle.remove()
        torch.set_default_device(previous)
    return {"script": str(script), "device": device, "steps": steps, "error": error,
            "peak_cuda": torch.cuda.max_memory_allocated() if cuda else None}


def _bytes(holders) -> int:
    """Bytes of the distinct tensors autograd keeps for backward (a tensor saved by several nodes counts once)."""
    seen: dict[tuple, int] = {}
    for h in holders:
        if h is not None:
            t = h.tensor
            seen[(t.data_ptr(), t.dtype, tuple(t.shape))] = t.numel() * t.element_size()
    return sum(seen.values())


def run_scripts(
    scripts: Sequence[Path], device: str = "cpu", seed: int = 0, timeout: float = 600, count_graph: bool = False,
    max_steps: int = 0, argv: Sequence[str] = (),
) -> list[dict]:
    """Run scripts in a fresh subprocess (clean interpreter, same seeds), each with the arguments `argv`, and
    return their records."""
    import tempfile

    import torch

    from torchlint.verify.process_group import run_group

    with tempfile.TemporaryDirectory(prefix="torchlint-verify-") as tmp:
        env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8", PYTHONHASHSEED=str(seed))
        cmd = [sys.executable, "-m", "torchlint.verify.runner", "--device", device, "--seed", str(seed), "--out", tmp]
        if count_graph:
            cmd.append("--count-graph")
        if max_steps:
            cmd += ["--max-steps", str(max_steps)]
        if argv:
            cmd += ["--argv-json", json.dumps(list(argv))]
        log = Path(tmp) / "stderr"
        with open(log, "wb") as err:  # a file, not a pipe: a script that prints megabytes costs no memory here
            try:
                code = run_group(cmd + [str(Path(s).resolve()) for s in scripts], timeout, env=env,
                                 stdout=subprocess.DEVNULL, stderr=err)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"the runs took longer than {timeout:g} s; stopped") from None
        if code != 0:
            tail = log.read_bytes()[-4000:].decode("utf-8", "replace")
            raise RuntimeError(f"verify runner failed ({code}):\n{tail}")
        for i, script in enumerate(scripts):
            if not (Path(tmp) / f"{i}.pt").is_file():  # the script ended the runner's process itself, status 0
                raise RuntimeError(f"the run of {script} ended before it was recorded (os._exit() or a signal); "
                                   "nothing was verified")
        return [torch.load(Path(tmp) / f"{i}.pt", weights_only=False) for i in range(len(scripts))]


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    p = argparse.ArgumentParser(prog="python -m torchlint.verify.runner")
    p.add_argument("--device", default=os.environ.get("TORCHLINT_DEVICE", "cpu"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--count-graph", action="store_true", help="also count live autograd nodes at each step (slower)")
    p.add_argument("--max-steps", type=int, default=0, help="stop each script after this many optimizer steps")
    p.add_argument("--argv-json", type=json.loads, default=[], help="the scripts' arguments, as a JSON list")
    p.add_argument("scripts", nargs="+", type=Path)
    args = p.parse_args(argv)
    for i, script in enumerate(args.scripts):
        # In the current directory, as `python path/to/train.py` runs it there: paths relative to where the user
        # stands resolve, and what the script writes lands there.
        rec = record_script(script.resolve(), args.device, args.seed, args.count_graph, args.max_steps, args.argv_json)
        torch.save(rec, args.out / f"{i}.pt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
