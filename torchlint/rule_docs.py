"""Rule documentation: one Markdown page per rule, generated from the rule modules themselves.

`python -m torchlint.rule_docs docs/rules` rewrites docs/rules/; a test keeps the pages in sync.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from torchlint.rules import ALL_RULES, Rule

FIX_SHORT = {None: "none", "safe": "safe", "unsafe": "unsafe", "safe or unsafe": "safe/unsafe"}
FIX_WORDS = {
    None: "no automatic fix",
    "safe": "safe (applied by `--fix`)",
    "unsafe": "unsafe (applied by `--fix --unsafe-fixes`)",
    "safe or unsafe": "safe or unsafe depending on the code (see below)",
}


DOCS_URL = "https://github.com/torchlint/torchlint/blob/main/docs/rules/{code}.md"
# Diagnostics about the run itself rather than the code's training logic.
META_RULES = {
    "TL900": ("unreadable-file", "the file cannot be read or decoded as Python source"),
    "TL901": ("syntax-error", "the file does not parse; it is not checked and never rewritten"),
    "TL902": ("internal-error", "torchlint failed on this file; please report it"),
    "TL903": ("invalid-fix", "a fix produced code that does not parse and was discarded"),
    "TL904": ("timeout", "checking the file took longer than --file-timeout"),
}


def doc_url(code: str) -> str:
    return DOCS_URL.format(code=code if code in {r.code for r in ALL_RULES} else "README")


def rule_name(code: str) -> str:
    for rule in ALL_RULES:
        if rule.code == code:
            return rule.name
    return META_RULES.get(code, (code, ""))[0]


def render(rule: type[Rule]) -> str:
    return (
        f"# {rule.code} `{rule.name}`\n\n"
        f"{rule.summary}.\n\n"
        f"- Fix: {FIX_WORDS[rule.fix_safety]}\n"
        f"- Suppress on a line: `# noqa: {rule.code}`; in configuration: `ignore = [\"{rule.code}\"]`\n"
        + textwrap.dedent(rule.doc).rstrip()
        + "\n"
    )


def index() -> str:
    rows = [f"| [{r.code}]({r.code}.md) | `{r.name}` | {r.summary} | {FIX_SHORT[r.fix_safety]} |" for r in ALL_RULES]
    meta = [f"| {code} | `{name}` | {summary} | none |" for code, (name, summary) in META_RULES.items()]
    return (
        "# Rules\n\n| code | name | what it flags | fix |\n|---|---|---|---|\n" + "\n".join(rows + meta) + "\n"
    )


def write(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for rule in ALL_RULES:
        (directory / f"{rule.code}.md").write_text(render(rule), encoding="utf-8")
    (directory / "README.md").write_text(index(), encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/rules"))
