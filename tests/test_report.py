"""The --report page (torchlint.report): one figure per fix, and what each of its panels counts."""

from __future__ import annotations

import html

import pytest


def test_the_page_says_what_each_panel_counts(tmp_path):
    pytest.importorskip("matplotlib")
    from torchlint.report import PANELS, write_report

    record = {"steps": [{"saved": 8, "graph_nodes": 11, "grads": []}] * 3}
    write_report(tmp_path / "report.html", tmp_path / "bad.py",
                 [{"title": "bad.py:12:5: TL002 drop it", "verdict": "kept", "original": record, "fixed": record}])
    page = (tmp_path / "report.html").read_text()
    assert [title for _, title, _ in PANELS] == ["autograd buffers alive", "graph nodes alive", "gradient norm"]
    for _, title, what in PANELS:
        assert f"<li><b>{title}</b>: {html.escape(what)}</li>" in page
