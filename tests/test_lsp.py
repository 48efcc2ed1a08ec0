"""The language server through a real LSP client over stdio (pygls's client): initialize, open a buggy
document, receive diagnostics, ask for code actions, apply the edit, check the text."""

from __future__ import annotations

import asyncio

from lsprotocol import types as lsp

from tests.helpers import start_language_server

BUGGY = (
    "for x, y in loader:\n"
    "    optimizer.zero_grad()\n"
    "    loss = criterion(model(x), y)\n"
    "    loss.backward(retain_graph=True)\n"
    "    scheduler.step()\n"
    "    optimizer.step()\n"
)
UNSAFE = "for x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"


def apply(text: str, edits: list[lsp.TextEdit]) -> str:
    lines = text.splitlines(keepends=True)
    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        start = sum(len(line) for line in lines[: e.range.start.line]) + e.range.start.character
        end = sum(len(line) for line in lines[: e.range.end.line]) + e.range.end.character
        text = "".join(lines)
        text = text[:start] + e.new_text + text[end:]
        lines = text.splitlines(keepends=True)
    return "".join(lines)


async def session(tmp_path, text: str):
    client, received, result = await start_language_server(tmp_path)
    uri = (tmp_path / "train.py").as_uri()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    published = await asyncio.wait_for(received.get(), 60)
    whole = lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=len(text.splitlines()), character=0))
    actions = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=whole,
        context=lsp.CodeActionContext(diagnostics=published.diagnostics)))
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[lsp.TextDocumentContentChangeWholeDocument(text="print('clean')\n")]))
    after_change = await asyncio.wait_for(received.get(), 60)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return result, uri, published, actions, after_change


def test_diagnostics_and_quick_fixes(tmp_path):
    result, uri, published, actions, after_change = asyncio.run(session(tmp_path, BUGGY))
    assert result.capabilities.code_action_provider is not None
    assert published.uri == uri
    diags = {d.code: d for d in published.diagnostics}
    assert set(diags) == {"TL002", "TL011"}
    tl002 = diags["TL002"]
    assert (tl002.range.start.line, tl002.range.start.character) == (3, 4)
    assert tl002.source == "torchlint" and tl002.code_description.href.endswith("/docs/rules/TL002.md")
    by_title = {a.title: a for a in actions}
    safe = next(a for a in actions if a.title.startswith("TL002"))
    assert safe.is_preferred and safe.kind == lsp.CodeActionKind.QuickFix
    fixed = apply(BUGGY, safe.edit.changes[uri])
    assert "    loss.backward()\n" in fixed and "retain_graph" not in fixed
    unsafe = next(a for a in actions if a.title.startswith("TL011"))
    assert unsafe.title.endswith("(unsafe: changes behaviour)") and not unsafe.is_preferred
    assert apply(BUGGY, unsafe.edit.changes[uri]).endswith("    optimizer.step()\n    scheduler.step()\n")
    fix_all = by_title["Fix all safe torchlint problems"]
    all_fixed = apply(BUGGY, fix_all.edit.changes[uri])
    assert "retain_graph" not in all_fixed and all_fixed.index("scheduler.step()") < all_fixed.index("optimizer.step()")
    assert list(after_change.diagnostics) == []


def test_unsafe_fix_is_labelled_and_applies(tmp_path):
    _, uri, published, actions, _ = asyncio.run(session(tmp_path, UNSAFE))
    assert [d.code for d in published.diagnostics] == ["TL004"]
    (action,) = [a for a in actions if a.kind == lsp.CodeActionKind.QuickFix]
    assert action.title == "TL004: insert `optimizer.zero_grad()` after the step (unsafe: changes behaviour)"
    assert apply(UNSAFE, action.edit.changes[uri]) == UNSAFE + "    optimizer.zero_grad()\n"
    assert not [a for a in actions if a.title.startswith("Fix all")]  # nothing safe to fix
