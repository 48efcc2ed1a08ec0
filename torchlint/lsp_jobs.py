"""What the language server's worker processes run (torchlint.workers): a document's diagnostics, with the edits of
their fixes, and the text "Fix all" gives it; each with the configuration the command would use for the file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torchlint.diagnostic import Diagnostic


@dataclass(frozen=True)
class Checked:
    diagnostics: tuple[Diagnostic, ...]
    docs_url: str | None  # the configuration's docs-url, for the links of the diagnostics


@dataclass(frozen=True)
class Document:
    path: str | None  # its file, for the configuration and the project; None for an unsaved buffer
    name: str  # what diagnostics call it: the path, else the URI
    text: str


def _settings(path: str | None) -> tuple[list[str] | None, str | None]:
    """The codes enabled for this document (per-file-ignores included) and the docs-url; (None, None), all rules,
    without a configuration or with one that does not load."""
    from torchlint.config import ConfigError, find_pyproject, load

    if not path:
        return None, None
    try:
        cfg = load(find_pyproject(Path(path)))
    except (ConfigError, OSError):
        return None, None
    return cfg.codes_for(Path(path)), cfg.docs_url


def check(doc: Document) -> Checked:
    from torchlint.batch import cached_project
    from torchlint.engine import lint_source, select_rules

    codes, docs_url = _settings(doc.path)
    project = cached_project(doc.path) if doc.path else None
    found = lint_source(doc.text, doc.name, select_rules(codes), with_edits=True, project=project)
    return Checked(tuple(found), docs_url)


def fix_all(doc: Document) -> str:
    """The text with every safe fix applied (the document's own text when none applies)."""
    from torchlint.batch import cached_project
    from torchlint.engine import fix_source, select_rules

    codes, _ = _settings(doc.path)
    project = cached_project(doc.path) if doc.path else None
    return fix_source(doc.text, doc.name, select_rules(codes), unsafe=False, project=project).text
