"""SARIF 2.1.0, for GitHub code scanning and other viewers: rule metadata, results, and fixes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Sequence

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


def _uri(path: str) -> str:
    return Path(path).as_posix()


def _region(line: int, column: int, end_line: int, end_column: int) -> dict:
    return {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column}


def render_sarif(diags: Sequence[Diagnostic], unsafe: bool = False, docs_url: str | None = None) -> str:
    rules = _rules(docs_url)
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for d in diags:
        location = {"artifactLocation": {"uri": _uri(d.path), "uriBaseId": "%SRCROOT%"},
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
                    "artifactLocation": {"uri": _uri(d.path), "uriBaseId": "%SRCROOT%"},
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
