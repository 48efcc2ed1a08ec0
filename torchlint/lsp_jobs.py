"""What the language server's worker processes run (torchlint.workers): a document's diagnostics, with the edits of
their fixes, and the text "Fix all" gives it; each with the configuration the command would use for the file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint.diagnostic import Diagnostic

if TYPE_CHECKING:
    from torchlint.project import Project


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
    without a configuration. ConfigError when the configuration cannot be read: the command would stop there."""
    from torchlint.config import find_pyproject, load

    if not path:
        return None, None
    cfg = load(find_pyproject(Path(path)))
    return cfg.codes_for(Path(path)), cfg.docs_url


def config_error(doc: Document, exc: Exception) -> Diagnostic:
    """What is published for a document whose configuration cannot be read (one line, at the top)."""
    from torchlint.codes import READ_ERROR

    return Diagnostic(doc.name, 1, 1, 1, 1, READ_ERROR, f"cannot read the configuration: {exc}; document not checked")


def _setup(doc: Document) -> tuple[list[str] | None, str | None, Project | None]:
    """The document's enabled codes, docs-url and project (`batch.cached_project`); ConfigError as `_settings`."""
    from torchlint.batch import cached_project

    codes, docs_url = _settings(doc.path)
    return codes, docs_url, cached_project(doc.path) if doc.path else None


def check(doc: Document) -> Checked:
    from torchlint.config import ConfigError
    from torchlint.engine import lint_source, select_rules

    try:
        codes, docs_url, project = _setup(doc)
    except ConfigError as exc:
        return Checked((config_error(doc, exc),), None)
    found = lint_source(doc.text, doc.name, select_rules(codes), with_edits=True, project=project)
    return Checked(tuple(found), docs_url)


def fix_all(doc: Document) -> str:
    """The text with every safe fix applied (the document's own text when none applies, or when its configuration
    cannot be read)."""
    from torchlint.config import ConfigError
    from torchlint.engine import fix_source, select_rules

    try:
        codes, _, project = _setup(doc)
    except ConfigError:
        return doc.text
    return fix_source(doc.text, doc.name, select_rules(codes), unsafe=False, project=project).text
