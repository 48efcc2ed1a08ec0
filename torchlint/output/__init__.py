"""Renderers of diagnostics for people and for programs."""

from torchlint.output.json_format import render_json
from torchlint.output.text import render_text

FORMATS = {"text": render_text, "json": render_json}

__all__ = ["FORMATS", "render_json", "render_text"]
