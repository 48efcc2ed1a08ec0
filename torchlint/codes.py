"""The codes of diagnostics about the run itself (TL9xx), and the links to the rule pages. The rules' own codes
come from the rule registry (`torchlint.rules.rule_codes`)."""

from __future__ import annotations

from pathlib import Path

READ_ERROR = "TL900"
SYNTAX_ERROR = "TL901"
INTERNAL_ERROR = "TL902"
FIX_ERROR = "TL903"
TIMEOUT = "TL904"
# Diagnostics about the run itself rather than the code's training logic.
META_RULES = {
    READ_ERROR: ("unreadable-file", "the file cannot be read or decoded as Python source"),
    SYNTAX_ERROR: ("syntax-error", "the file does not parse; it is not checked (a notebook export's IPython lines aside) "
                                   "and never rewritten"),
    INTERNAL_ERROR: ("internal-error", "torchlint failed on this file; please report it"),
    FIX_ERROR: ("invalid-fix", "a fix was discarded: it produced code that does not parse, or (--verify) changed "
                "what a safe fix must keep"),
    TIMEOUT: ("timeout", "checking the file took longer than --file-timeout"),
}

# The rule pages ship inside the package (package data, written with docs/rules/ by torchlint.rule_docs): a link
# to one resolves wherever torchlint is installed, offline, at the version that reported the finding.
PAGES = Path(__file__).resolve().parent / "docs" / "rules"


def doc_url(code: str, base: str | None = None) -> str:
    """The link to a code's page (TL9xx: the index, which describes them): under `base`, the `docs-url` of the
    configuration (`{code}` in it is replaced, else `/CODE.md` is appended), else the installed page's file:// URI."""
    page = "README" if code in META_RULES else code
    if base:
        return base.replace("{code}", page) if "{code}" in base else f"{base.rstrip('/')}/{page}.md"
    return (PAGES / f"{page}.md").as_uri()
