"""A JSON array, one object per diagnostic: the stable machine contract (see README)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Sequence

from torchlint.diagnostic import Diagnostic
from torchlint.codes import doc_url


def render_json(diags: Sequence[Diagnostic], unsafe: bool = False, docs_url: str | None = None) -> str:
    items = []
    for d in diags:
        item = asdict(d)
        if d.cell is None:
            del item["cell"]
        if d.runtime is None:
            del item["runtime"]
        item["url"] = doc_url(d.code, docs_url)
        if d.fix is not None:
            item["fix"] = {
                "applicability": d.fix.applicability,
                "message": d.fix.message,
                "edits": [asdict(e) for e in d.fix.edits],
            }
        items.append(item)
    return json.dumps(items, indent=2) + "\n"
