"""`path:line:col: CODE message`, one per line: stable and greppable."""

from __future__ import annotations

from typing import Sequence

from torchlint.diagnostic import Diagnostic


def render_text(diags: Sequence[Diagnostic], unsafe: bool = False, docs_url: str | None = None) -> str:
    lines = []
    for d in diags:
        mark = ""
        if d.fix is not None:
            mark = "[*] " if d.fix.applicability == "safe" or unsafe else "[unsafe fix] "
        cell = f"cell {d.cell}:" if d.cell is not None else ""
        runtime = f"[{d.runtime}] " if d.runtime is not None else ""
        lines.append(f"{d.path}:{cell}{d.line}:{d.column}: {d.code} {runtime}{mark}{d.message}")
    return "".join(line + "\n" for line in lines)


def render_statistics(diags: Sequence[Diagnostic], unsafe: bool = False, docs_url: str | None = None) -> str:
    """Counts per rule, most frequent first: `  12  TL004  [*] missing-zero-grad`."""
    from torchlint.rule_docs import rule_name

    counts: dict[str, int] = {}
    fixable: dict[str, bool] = {}
    for d in diags:
        counts[d.code] = counts.get(d.code, 0) + 1
        if d.fix is not None and (d.fix.applicability == "safe" or unsafe):
            fixable[d.code] = True
    width = max((len(str(n)) for n in counts.values()), default=1)
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return "".join(
        f"{n:>{width}}  {code}  {'[*] ' if fixable.get(code) else '    '}{rule_name(code)}\n" for code, n in rows
    )
