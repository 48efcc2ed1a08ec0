"""GitHub Actions workflow commands: one `::error` annotation per finding, shown on the pull request's diff."""

from __future__ import annotations

from typing import Sequence

from torchlint.diagnostic import Diagnostic


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(diags: Sequence[Diagnostic], unsafe: bool = False, docs_url: str | None = None) -> str:
    lines = []
    for d in diags:
        where = f"cell {d.cell}, " if d.cell is not None else ""
        props = (f"file={_prop(d.path)},line={d.line},col={d.column},endLine={d.end_line},"
                 f"endColumn={d.end_column},title={_prop(f'torchlint {d.code}')}")
        if d.cell is not None:
            props = f"file={_prop(d.path)},title={_prop(f'torchlint {d.code}')}"
        lines.append(f"::error {props}::{_data(f'{where}{d.code} {d.message}')}")
    return "".join(line + "\n" for line in lines)
