"""Renderers of diagnostics for people and for programs. Each takes the diagnostics, whether unsafe fixes are
applied (`unsafe`), and where the rule pages are (`docs_url`, the configuration's `docs-url`; None: the pages of
the package), for the formats that link to them."""

from torchlint.output.full import render_full
from torchlint.output.github import render_github
from torchlint.output.json_format import render_json
from torchlint.output.sarif import render_sarif
from torchlint.output.text import render_statistics, render_text

FORMATS = {
    "text": render_text, "full": render_full, "json": render_json, "sarif": render_sarif, "github": render_github,
}

__all__ = ["FORMATS", "render_full", "render_github", "render_json", "render_sarif", "render_statistics", "render_text"]
