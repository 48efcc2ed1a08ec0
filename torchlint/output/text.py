"""`path:line:col: CODE message`, one per line: stable and greppable."""

from __future__ import annotations

from typing import Sequence

from torchlint.diagnostic import Diagnostic


def render_text(diags: Sequence[Diagnostic], unsafe: bool = False) -> str:
    lines = []
    for d in diags:
        mark = ""
        if d.fix is not None:
            mark = "[*] " if d.fix.applicability == "safe" or unsafe else "[unsafe fix] "
        lines.append(f"{d.path}:{d.line}:{d.column}: {d.code} {mark}{d.message}")
    return "".join(line + "\n" for line in lines)
