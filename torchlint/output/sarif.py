"""SARIF 2.1.0, for GitHub code scanning and other viewers: rule metadata, results, and fixes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Sequence
from urllib.parse import quote

from torchlint import __version__
from torchlint.diagnostic import Diagnostic
from torchlint.codes import META_RULES, doc_url

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _rules(docs_url: str | None) -> list[dict]:
    from torchlint.rule_docs import render
    from torchlint.rules import all_rules

    rules = []
    for rule in all_rules():
        rules.append({
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": " ".join((sys.modules[rule.__module__].__doc__ or rule.summary).split())},
            "helpUri": doc_url(rule.code, docs_url),
            "help": {"text": rule.summary, "markdown": render(rule)},
            "defaultConfiguration": {"level": "error"},
            "properties": {"fixSafety": rule.fix_safety or "none", "tags": ["pytorch", "training-loop"]},
        })
    for code, (name, summary) in META_RULES.items():
        rules.append({
            "id": code,
            "name": name,
            "shortDescription": {"text": summary},
            "helpUri": doc_url(code, docs_url),
            "defaultConfiguration": {"level": "error"},
        })
    return rules


# Characters a path segment may hold as they are (RFC 3986 pchar, less ':', which in a relative reference's first
# segment would read as a scheme); everything else, '%' included, is percent-encoded from the path's bytes.
_PATH_SAFE = "/!$&'()*+,;=@"


def _location(path: str) -> dict:
    """A path as SARIF's artifactLocation: a relative reference from %SRCROOT%, or for an absolute path a file URI;
    percent-encoded, so that `a b.py` is a URI reference and `a%20b.py`, `x#y.py`, `q?x.py` name those files."""
    posix = Path(path)
    if posix.is_absolute():
        return {"uri": "file://" + quote(os.fsencode(posix.as_posix()), safe=_PATH_SAFE)}
    return {"uri": quote(os.fsencode(posix.as_posix()), safe=_PATH_SAFE), "uriBaseId": "%SRCROOT%"}


def _region(line: int, column: int, end_line: int, end_column: int) -> dict:
    return {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column}


def render_sarif(diags: Sequence[Diagnostic], unsafe: bool = False, docs_url: str | None = None) -> str:
    rules = _rules(docs_url)
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for d in diags:
        location = {"artifactLocation": _location(d.path),
                    "region": _region(d.line, d.column, d.end_line, d.end_column)}
        result: dict = {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": "error",
            "message": {"text": d.message},
            "locations": [{"physicalLocation": location}],
        }
        properties = {k: v for k, v in (("cell", d.cell), ("runtime", d.runtime)) if v is not None}
        if properties:
            result["properties"] = properties
        if d.fix is not None and d.fix.edits and d.cell is None:
            result["fixes"] = [{
                "description": {"text": f"{d.fix.message} ({d.fix.applicability} fix)"},
                "artifactChanges": [{
                    "artifactLocation": _location(d.path),
                    "replacements": [
                        {"deletedRegion": _region(e.line, e.column, e.end_line, e.end_column),
                         "insertedContent": {"text": e.content}}
                        for e in d.fix.edits
                    ],
                }],
            }]
        results.append(result)
    log = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "torchlint",
                "version": __version__,
                "informationUri": doc_url("README", docs_url),  # the index of the rules
                "rules": rules,
            }},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
    return json.dumps(log, indent=2) + "\n"
