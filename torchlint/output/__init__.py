"""Renderers of diagnostics for people and for programs."""

from torchlint.output.github import render_github
from torchlint.output.json_format import render_json
from torchlint.output.sarif import render_sarif
from torchlint.output.text import render_statistics, render_text

FORMATS = {"text": render_text, "json": render_json, "sarif": render_sarif, "github": render_github}

__all__ = ["FORMATS", "render_github", "render_json", "render_sarif", "render_statistics", "render_text"]
