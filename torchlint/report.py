"""`--report FILE.html` with `--fix --verify`: per-step plots of each verified fix, before and after.

For each fix: the autograd buffers and graph nodes alive after each optimizer step, and the gradient norm at each
step, of the original script and of the script with that fix (both counted by torchlint.verify.runner, each run
counting only what it made itself). Drawn with matplotlib (the `report` extra), each figure embedded in one
self-contained HTML file, with a line under it that says what each panel counts.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path


# Each panel: the record's metric, its title, and what it counts (said on the page under each figure).
PANELS = (
    ("saved", "autograd buffers alive",
     "tensors autograd saved for a backward that are still held after the step (what retain_graph=True keeps)"),
    ("graph_nodes", "graph nodes alive",
     "autograd graph nodes that this run made and that live tensors still reach after the step; "
     "a count that grows at every step is a graph kept across iterations"),
    ("grad_norm", "gradient norm",
     "the L2 norm of all the parameters' gradients at the step; a safe fix keeps the two lines on top of each other"),
)


MISSING = "--report needs matplotlib: pip install 'torchlint[report]'"


def missing() -> str | None:
    """What --report lacks here (None: nothing), asked before any script runs or any fix is written."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return MISSING
    return None


def write_report(target: Path, script: Path, runs: list[dict]) -> None:
    """`runs`: for each fix, {"title", "verdict", "original", "fixed"} with the recorder's two records."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit(f"torchlint: error: {MISSING}") from None
    sections = []
    legend = "".join(f"<li><b>{html.escape(label)}</b>: {html.escape(what)}</li>" for _, label, what in PANELS)
    for run in runs:
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
        for ax, (metric, label, _) in zip(axes, PANELS):
            for name, style in (("original", "-o"), ("fixed", "-s")):
                values = [_value(step, metric) for step in run[name]["steps"]]
                ax.plot(range(1, len(values) + 1), values, style, label=name, markersize=3)
            ax.set_title(label, fontsize=10)
            ax.set_xlabel("optimizer step")
            ax.legend(fontsize=8)
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=90)
        plt.close(fig)
        image = base64.b64encode(buffer.getvalue()).decode("ascii")
        sections.append(f"<h2>{html.escape(run['title'])}</h2><p>{html.escape(run['verdict'])}</p>"
                        f'<img alt="{html.escape(run["title"])}" src="data:image/png;base64,{image}">'
                        f"<ul>{legend}</ul>")
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>torchlint --fix --verify: "
            f"{html.escape(str(script))}</title></head><body><h1>torchlint --fix --verify: {html.escape(str(script))}"
            "</h1>" + "".join(sections) + "</body></html>\n")
    target.write_text(page, encoding="utf-8")


def _value(step: dict, metric: str) -> float:
    if metric != "grad_norm":
        return float(step[metric])
    return float(sum(float((g.double() ** 2).sum()) for g in step["grads"] if g is not None) ** 0.5)
