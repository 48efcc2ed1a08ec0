"""Rule documentation: one Markdown page per rule, generated from the rule modules themselves.

`python -m torchlint.rule_docs` rewrites docs/rules/ (for readers of the repository) and torchlint/docs/rules/ (the
copy that ships with the package, which the links of the output point at); a test keeps both in sync.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from torchlint.codes import META_RULES, PAGES, doc_url  # noqa: F401  (doc_url is re-exported)
from torchlint.rules import Rule, all_rules

FIX_SHORT = {None: "none", "safe": "safe", "unsafe": "unsafe", "safe or unsafe": "safe/unsafe"}
FIX_WORDS = {
    None: "no automatic fix",
    "safe": "safe (applied by `--fix`)",
    "unsafe": "unsafe (applied by `--fix --unsafe-fixes`)",
    "safe or unsafe": "safe or unsafe depending on the code (see below)",
}


def rule_name(code: str) -> str:
    for rule in all_rules():
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
    rows = [f"| [{r.code}]({r.code}.md) | `{r.name}` | {r.summary} | {FIX_SHORT[r.fix_safety]} |" for r in all_rules()]
    meta = [f"| {code} | `{name}` | {summary} | none |" for code, (name, summary) in META_RULES.items()]
    return (
        "# Rules\n\n| code | name | what it flags | fix |\n|---|---|---|---|\n" + "\n".join(rows + meta) + "\n"
    )


def write(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for rule in all_rules():
        (directory / f"{rule.code}.md").write_text(render(rule), encoding="utf-8")
    (directory / "README.md").write_text(index(), encoding="utf-8")


if __name__ == "__main__":
    for target in sys.argv[1:] or [str(PAGES.parent.parent.parent / "docs" / "rules"), str(PAGES)]:
        write(Path(target))
