"""The diagnostic codes, as plain data: what configuration, the command line and the cache need to know
without importing the rules (and libcst) — a warm run that only reads the cache stays cheap.
tests/test_docs.py checks that RULE_CODES matches the rule registry."""

from __future__ import annotations

RULE_CODES = ("TL001", "TL002", "TL003", "TL004", "TL005", "TL006", "TL007", "TL008", "TL009", "TL010", "TL011")

READ_ERROR = "TL900"
SYNTAX_ERROR = "TL901"
INTERNAL_ERROR = "TL902"
FIX_ERROR = "TL903"
TIMEOUT = "TL904"
# Diagnostics about the run itself rather than the code's training logic.
META_RULES = {
    READ_ERROR: ("unreadable-file", "the file cannot be read or decoded as Python source"),
    SYNTAX_ERROR: ("syntax-error", "the file does not parse; it is not checked and never rewritten"),
    INTERNAL_ERROR: ("internal-error", "torchlint failed on this file; please report it"),
    FIX_ERROR: ("invalid-fix", "a fix was discarded: it produced code that does not parse, or (--verify) changed "
                "what a safe fix must keep"),
    TIMEOUT: ("timeout", "checking the file took longer than --file-timeout"),
}

DOCS_URL = "https://github.com/torchlint/torchlint/blob/main/docs/rules/{code}.md"


def doc_url(code: str) -> str:
    return DOCS_URL.format(code=code if code in RULE_CODES else "README")
