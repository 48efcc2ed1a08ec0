"""The language server through a real LSP client over stdio (pygls's client): initialize, open a buggy
document, receive diagnostics, ask for code actions, apply the edit, check the text."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys

import pytest
from lsprotocol import types as lsp

from tests.conftest import ROOT
from tests.helpers import start_language_server
from tests.test_batch import slow_to_parse
from tests.test_docs import linked_page

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
    assert tl002.source == "torchlint" and linked_page(tl002.code_description.href).name == "TL002.md"
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


def open_params(uri: str, text: str, version: int = 1) -> lsp.DidOpenTextDocumentParams:
    return lsp.DidOpenTextDocumentParams(
        text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=version, text=text))


def change_params(uri: str, text: str, version: int) -> lsp.DidChangeTextDocumentParams:
    return lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)])


async def stop(client) -> None:
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()


async def until(received: asyncio.Queue, uri: str, seconds: float) -> lsp.PublishDiagnosticsParams:
    """The next diagnostics published for `uri` (others are dropped), or a timeout."""
    while True:
        published = await asyncio.wait_for(received.get(), seconds)
        if published.uri == uri:
            return published


def test_a_document_slow_to_check_does_not_hold_up_another_and_is_stopped_at_the_limit(tmp_path):
    """While a document libcst takes 20 s over is being checked, another document's diagnostics are published
    before the slow one's; the slow one gets TL904 at the server's --file-timeout."""
    async def go():
        client, received, _ = await start_language_server(tmp_path, "--file-timeout", "6")
        slow, small = (tmp_path / "slow.py").as_uri(), (tmp_path / "small.py").as_uri()
        client.text_document_did_open(open_params(slow, slow_to_parse(150)))
        await asyncio.sleep(1)  # the slow check is under way
        client.text_document_did_open(open_params(small, BUGGY))
        published = []  # every publication, in the order it came, until the slow document's
        while not any(p.uri == slow for p in published):
            published.append(await asyncio.wait_for(received.get(), 60))  # a hang guard
        await stop(client)
        return slow, small, published

    slow, small, published = asyncio.run(go())
    assert [p.uri for p in published] == [small, slow]
    quick, stopped = published
    assert {d.code for d in quick.diagnostics} == {"TL002", "TL011"}
    assert [(d.code, d.message) for d in stopped.diagnostics] == [
        ("TL904", "checking took longer than 6s; file not checked")]


def test_a_burst_of_edits_is_checked_once_at_its_last_version(tmp_path):
    """Of 20 changes in a row, only the last version is checked and published: the others are not."""
    async def go():
        client, received, _ = await start_language_server(tmp_path)
        uri = (tmp_path / "train.py").as_uri()
        client.text_document_did_open(open_params(uri, "print('start')\n"))
        for version in range(2, 22):
            client.text_document_did_change(change_params(uri, BUGGY if version == 21 else f"x = {version}\n", version))
        published = [await until(received, uri, 60)]
        while published[-1].version != 21:
            published.append(await until(received, uri, 60))
        try:
            published.append(await until(received, uri, 2))  # nothing more is coming
        except asyncio.TimeoutError:
            pass
        await stop(client)
        return published

    published = asyncio.run(go())
    assert [p.version for p in published] in ([21], [1, 21]), [p.version for p in published]
    assert {d.code for d in published[-1].diagnostics} == {"TL002", "TL011"}


def test_a_document_never_opened_is_no_error(tmp_path):
    """A didChange for a document the editor never opened popped up "Error in server: KeyError", and a code action
    on one answered -32603; both are ignored (no document, nothing to check or fix)."""
    async def go():
        client, received, _ = await start_language_server(tmp_path)
        stray, real = (tmp_path / "stray.py").as_uri(), (tmp_path / "train.py").as_uri()
        client.text_document_did_change(change_params(stray, BUGGY, 2))
        whole = lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=6, character=0))
        actions = await client.text_document_code_action_async(lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=stray), range=whole,
            context=lsp.CodeActionContext(diagnostics=[])))
        client.text_document_did_open(open_params(real, BUGGY))
        published = await until(received, real, 60)  # the server is still there and answering
        await stop(client)
        return client.shown, actions, published

    shown, actions, published = asyncio.run(go())
    assert shown == [] and not actions and {d.code for d in published.diagnostics} == {"TL002", "TL011"}


def test_code_descriptions_follow_the_configured_docs_url(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\ndocs-url = "https://docs.example.org/tl"\n')
    _, _, published, _, _ = asyncio.run(session(tmp_path, BUGGY))
    assert {d.code: d.code_description.href for d in published.diagnostics} == {
        "TL002": "https://docs.example.org/tl/TL002.md", "TL011": "https://docs.example.org/tl/TL011.md"}


def test_neovim_shows_the_diagnostics_and_applies_a_quick_fix(tmp_path):
    """A real editor as the client: Neovim (Debian's package) headless, with `torchlint server` as the buffer's
    language server (tests/neovim_client.lua drives it). Skipped only where nvim is missing outside CI; .ci/run
    installs it, and in CI (CI=true) a missing nvim fails."""
    nvim = shutil.which("nvim")
    if nvim is None:
        if os.environ.get("CI") == "true":
            pytest.fail("nvim is missing in CI: .ci/run installs Debian's neovim package")
        pytest.skip("nvim is not installed (apt-get install neovim)")
    (tmp_path / "train.py").write_text(BUGGY)
    out = tmp_path / "seen.json"
    env = dict(os.environ, TL_PYTHON=sys.executable, TL_ROOT=str(tmp_path), TL_FILE=str(tmp_path / "train.py"),
               TL_OUT=str(out), XDG_STATE_HOME=str(tmp_path / "state"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    proc = subprocess.run([nvim, "--headless", "--clean", "-n", "-i", "NONE",
                           "-c", f"luafile {ROOT / 'tests' / 'neovim_client.lua'}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.is_file(), (proc.returncode, proc.stdout, proc.stderr)
    seen = json.loads(out.read_text())
    assert "error" not in seen, seen
    assert seen["published"] and seen["before"] == [{"code": "TL002", "line": 3, "col": 4},
                                                    {"code": "TL011", "line": 4, "col": 4}], seen
    assert seen["applied"] == "TL002: drop `retain_graph=True` from the last backward of the iteration", seen
    assert seen["text"] == BUGGY.replace("loss.backward(retain_graph=True)", "loss.backward()")
    assert seen["rechecked"] and seen["after"] == [{"code": "TL011", "line": 4, "col": 4}], seen


def test_a_newer_edit_stops_the_check_of_the_older_text():
    """One edit of a large file left a worker on the check of its older text until that was done (about a minute),
    and a small file's check waited for a worker meanwhile; now the check of a text a newer edit replaced is
    cancelled (torchlint.workers kills its worker). Here the pool is a stand-in that only records the calls."""
    import threading
    from types import SimpleNamespace

    from torchlint import lsp_server
    from torchlint.lsp_jobs import Checked
    from torchlint.workers import Failed

    uri = "file:///project/big.py"
    calls: list[tuple[str, object]] = []
    released = threading.Event()  # what ends a call no one cancels (the old code's), once the test is done

    class Recorder:
        def call(self, func, doc, timeout, cancel=None):
            calls.append((doc.text, cancel))
            if doc.text == "old text":  # a check that would take a minute
                (cancel or released).wait(60)
                return Failed(False, "cancelled")
            return Checked((), None)

    async def go():
        checker = lsp_server._Checker()
        checker._pool = Recorder()
        docs = {uri: SimpleNamespace(source="old text", version=1)}
        published: list = []
        ls = SimpleNamespace(workspace=SimpleNamespace(text_documents=docs),
                             text_document_publish_diagnostics=published.append)
        try:
            checker.edited(ls, uri)
            for _ in range(300):  # until the old text's check runs
                if calls:
                    break
                await asyncio.sleep(0.05)
            docs[uri] = SimpleNamespace(source="new text", version=2)
            checker.edited(ls, uri)
            for _ in range(300):
                if published:
                    break
                await asyncio.sleep(0.05)
        finally:
            released.set()
        return calls, published

    calls, published = asyncio.run(go())
    assert [text for text, _ in calls] == ["old text", "new text"]
    assert calls[0][1] is not None and calls[0][1].is_set()  # the old text's check was told to stop
    assert [p.version for p in published] == [2]
