"""Compare two recorded runs step by step and name the first difference."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    """`torch.allclose(a, b, rtol, atol)` on every gradient and parameter, at every step."""

    rtol: float = 1e-4
    atol: float = 1e-6


@dataclass(frozen=True)
class Mismatch:
    step: int  # 0-based optimizer step (in recording order)
    what: str  # "grad", "param", "steps", "error", "optimizer"
    index: int  # parameter index within the optimizer (-1 when not about a parameter)
    max_abs: float
    max_rel: float
    detail: str

    def __str__(self) -> str:
        if self.index < 0:
            return f"step {self.step}: {self.detail}"
        return (f"step {self.step}: {self.what} of parameter {self.index} differs "
                f"(max abs error {self.max_abs:.3g}, max rel error {self.max_rel:.3g}) {self.detail}").rstrip()


def compare_records(run: dict, reference: dict, tol: Tolerance = Tolerance()) -> Mismatch | None:
    """None when `run` matches `reference` at every step within `tol`, else the first difference."""
    import torch

    if run["error"] or reference["error"]:
        if run["error"] != reference["error"]:
            return Mismatch(0, "error", -1, 0.0, 0.0, f"run error: {run['error']!r}; reference error: {reference['error']!r}")
    a_steps, b_steps = run["steps"], reference["steps"]
    for i, (a, b) in enumerate(zip(a_steps, b_steps)):
        if a["optimizer"] != b["optimizer"] or len(a["params"]) != len(b["params"]):
            return Mismatch(i, "optimizer", -1, 0.0, 0.0, "different optimizer or parameter count")
        for what in ("grads", "params"):
            for j, (x, y) in enumerate(zip(a[what], b[what])):
                if x is None or y is None:
                    if (x is None) != (y is None):
                        return Mismatch(i, what[:-1], j, float("inf"), float("inf"), "(one is None)")
                    continue
                if x.shape != y.shape:
                    return Mismatch(i, what[:-1], j, float("inf"), float("inf"), f"(shape {tuple(x.shape)} vs {tuple(y.shape)})")
                if not torch.allclose(x, y, rtol=tol.rtol, atol=tol.atol):
                    diff = (x - y).abs()
                    rel = diff / y.abs().clamp_min(1e-12)
                    return Mismatch(i, what[:-1], j, float(diff.max()), float(rel.max()), "")
    if len(a_steps) != len(b_steps):
        n = min(len(a_steps), len(b_steps))
        return Mismatch(n, "steps", -1, 0.0, 0.0, f"{len(a_steps)} optimizer steps vs {len(b_steps)} in the reference")
    return None
