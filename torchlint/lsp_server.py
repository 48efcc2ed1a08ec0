"""`torchlint server`: a Language Server (stdio) for editors, built on pygls.

Diagnostics on open, change and save; code actions that apply a finding's fix (safe fixes as preferred
quick-fixes, unsafe ones labelled "unsafe"), and "Fix all safe torchlint problems" for the whole document.
Configuration comes from the nearest pyproject.toml of the document, as for the command.

Checking never runs on the event loop: each check runs in a worker process (torchlint.workers, torchlint.lsp_jobs),
killed at the time limit (`--file-timeout`, TL904), so that a document slow to check holds up neither the editor's
messages nor the other documents. An edit waits DEBOUNCE seconds for the next one, and only the last version of a
document is checked and published: a check of an older text still running is stopped (its worker killed).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
from urllib.parse import unquote

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.uris import to_fs_path

from torchlint import __version__
from torchlint.batch import lost
from torchlint.codes import doc_url
from torchlint.diagnostic import Diagnostic
from torchlint.source.lines import split_lines
from torchlint.lsp_jobs import Checked, Document, check, fix_all
from torchlint.workers import Failed, Pool

SOURCE = "torchlint"
DEBOUNCE = 0.2  # seconds: a burst of keystrokes is checked once, at its end
DEFAULT_TIMEOUT = 60.0  # seconds per check, as the command's --file-timeout


class _Protocol(LanguageServerProtocol):
    """pygls's protocol, except that a change to a document that is not open (never opened, or closed) is ignored:
    pygls raised KeyError on it, which editors show as "Error in server"."""

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: lsp.DidChangeTextDocumentParams):
        if unquote(params.text_document.uri) in self.workspace.text_documents:
            yield from super().lsp_text_document__did_change(params)


class _Checker:
    """The documents' checks: at most one waiting per document (a newer edit replaces it), each run in a worker,
    published only while its document is still at the text checked."""

    def __init__(self) -> None:
        self.timeout = DEFAULT_TIMEOUT
        self._pool: Pool | None = None
        self._generation: dict[str, int] = {}  # uri -> edits seen: a check of an older one is not published
        self._waiting: dict[str, asyncio.Task] = {}
        self._last: dict[str, tuple[str, Checked]] = {}  # uri -> its last check, and the text it was of

    def pool(self) -> Pool:
        if self._pool is None:
            # Workers forked from a clean server process that has libcst loaded (not from this one, which has
            # threads); spawned where there is no fork.
            method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else None
            size = min(4, max(2, os.cpu_count() or 1))  # a slow document leaves a worker for the others
            self._pool = Pool(size, start_method=method, preload=["torchlint.lsp_jobs", "torchlint.engine"])
        return self._pool

    def edited(self, ls: LanguageServer, uri: str, fresh: bool = False) -> None:
        """Check the document's text after DEBOUNCE seconds without another edit, and publish what it finds."""
        generation = self._generation[uri] = self._generation.get(uri, 0) + 1
        waiting = self._waiting.pop(uri, None)
        if waiting is not None:
            waiting.cancel()
        if fresh:
            self._last.pop(uri, None)  # saved: the configuration or a helper file may have changed too
        self._waiting[uri] = asyncio.ensure_future(self._publish(ls, uri, generation))

    def closed(self, uri: str) -> None:
        self._generation[uri] = self._generation.get(uri, 0) + 1
        waiting = self._waiting.pop(uri, None)
        if waiting is not None:
            waiting.cancel()
        self._last.pop(uri, None)

    async def _publish(self, ls: LanguageServer, uri: str, generation: int) -> None:
        await asyncio.sleep(DEBOUNCE)
        doc = _open_document(ls, uri)
        if doc is None:
            return
        text, version = doc.source, doc.version
        found, docs_url = await self.checked(uri, text)
        if self._generation.get(uri) != generation:
            return  # edited since: that edit's check publishes
        self._waiting.pop(uri, None)
        lines = split_lines(text)
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri=uri, version=version, diagnostics=[_diagnostic(lines, d, docs_url) for d in found]))

    async def checked(self, uri: str, text: str) -> tuple[tuple[Diagnostic, ...], str | None]:
        """The diagnostics of this text of the document, and the docs-url for their links: the last check's when it
        was of the same text; a TL904 or TL902 when the check ran past the limit or its worker died."""
        last = self._last.get(uri)
        if last is not None and last[0] == text:
            return last[1].diagnostics, last[1].docs_url
        doc = _document(uri, text)
        result = await self._in_worker(check, doc)
        if isinstance(result, Failed):
            return (lost(doc.name, self.timeout, None if result.timed_out else result.detail),), None
        self._last[uri] = (text, result)
        return result.diagnostics, result.docs_url

    async def fixed(self, uri: str, text: str) -> str:
        """The text with every safe fix applied (the same text when none applies, or the check failed)."""
        result = await self._in_worker(fix_all, _document(uri, text))
        return text if isinstance(result, Failed) else result

    async def _in_worker(self, func, doc: Document):
        """func(doc) in a worker. When the task awaiting it is cancelled (a newer edit of the document, its closing,
        the editor cancelling its request), the worker is stopped at once: a check of a large file's older text
        would otherwise hold it to the end, and the other documents' checks wait for workers meanwhile."""
        cancel = threading.Event()
        try:
            return await asyncio.to_thread(self.pool().call, func, doc, self.timeout, cancel)
        except asyncio.CancelledError:
            cancel.set()
            raise

    def close(self) -> None:
        for task in self._waiting.values():
            task.cancel()
        if self._pool is not None:
            self._pool.close()


server = LanguageServer("torchlint", __version__, protocol_cls=_Protocol,
                        text_document_sync_kind=lsp.TextDocumentSyncKind.Full)
checker = _Checker()


def _document(uri: str, text: str) -> Document:
    path = to_fs_path(uri)
    return Document(path, path or uri, text)


def _open_document(ls: LanguageServer, uri: str):
    """The document the editor has open at `uri`, or None (pygls would make one of the file on disk)."""
    return ls.workspace.text_documents.get(unquote(uri))


def _utf16(line: str, column: int) -> int:
    """LSP counts characters in UTF-16 code units; torchlint in code points (1-based)."""
    return len(line[: column - 1].encode("utf-16-le")) // 2


def _range(lines: list[str], d: Diagnostic) -> lsp.Range:
    start_text = lines[d.line - 1] if 0 < d.line <= len(lines) else ""
    end_text = lines[d.end_line - 1] if 0 < d.end_line <= len(lines) else ""
    return lsp.Range(
        start=lsp.Position(line=d.line - 1, character=_utf16(start_text, d.column)),
        end=lsp.Position(line=d.end_line - 1, character=_utf16(end_text, d.end_column)),
    )


def _diagnostic(lines: list[str], d: Diagnostic, docs_url: str | None) -> lsp.Diagnostic:
    return lsp.Diagnostic(
        range=_range(lines, d),
        message=d.message,
        severity=lsp.DiagnosticSeverity.Error if d.code.startswith("TL9") else lsp.DiagnosticSeverity.Warning,
        code=d.code,
        code_description=lsp.CodeDescription(href=doc_url(d.code, docs_url)),
        source=SOURCE,
    )


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: LanguageServer, params: lsp.DidOpenTextDocumentParams) -> None:
    checker.edited(ls, params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: LanguageServer, params: lsp.DidChangeTextDocumentParams) -> None:
    checker.edited(ls, params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: LanguageServer, params: lsp.DidSaveTextDocumentParams) -> None:
    checker.edited(ls, params.text_document.uri, fresh=True)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: LanguageServer, params: lsp.DidCloseTextDocumentParams) -> None:
    checker.closed(params.text_document.uri)
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))


@server.feature(lsp.SHUTDOWN)
def shutdown(ls: LanguageServer, *args) -> None:
    checker.close()


@server.feature(
    lsp.TEXT_DOCUMENT_CODE_ACTION,
    lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.SourceFixAll]),
)
async def code_actions(ls: LanguageServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    uri = params.text_document.uri
    doc = _open_document(ls, uri)
    if doc is None:
        return []  # not open in the editor: nothing of it to fix
    text = doc.source
    found, docs_url = await checker.checked(uri, text)
    lines = split_lines(text)
    wanted = params.context.only
    actions: list[lsp.CodeAction] = []
    if not wanted or lsp.CodeActionKind.QuickFix in wanted:
        for d in found:
            diag = _diagnostic(lines, d, docs_url)
            if d.fix is None or not d.fix.edits or not _overlaps(diag.range, params.range):
                continue
            unsafe = d.fix.applicability == "unsafe"
            edits = [
                lsp.TextEdit(
                    range=lsp.Range(start=lsp.Position(line=e.line - 1, character=0),
                                    end=lsp.Position(line=e.end_line - 1, character=0)),
                    new_text=e.content,
                )
                for e in d.fix.edits
            ]
            actions.append(lsp.CodeAction(
                title=f"{d.code}: {d.fix.message}" + (" (unsafe: changes behaviour)" if unsafe else ""),
                kind=lsp.CodeActionKind.QuickFix,
                diagnostics=[diag],
                is_preferred=not unsafe,
                edit=lsp.WorkspaceEdit(changes={uri: edits}),
            ))
    if not wanted or any(str(k).startswith("source") for k in wanted):
        fixed = await checker.fixed(uri, text) if any(d.fix is not None for d in found) else text
        if fixed != text:
            end = lsp.Position(line=len(split_lines(text, keepends=True)), character=0)
            actions.append(lsp.CodeAction(
                title="Fix all safe torchlint problems",
                kind=lsp.CodeActionKind.SourceFixAll,
                edit=lsp.WorkspaceEdit(changes={uri: [lsp.TextEdit(
                    range=lsp.Range(start=lsp.Position(line=0, character=0), end=end), new_text=fixed)]}),
            ))
    return actions


def _overlaps(a: lsp.Range, b: lsp.Range) -> bool:
    return (a.start.line, a.start.character) <= (b.end.line, b.end.character) and (
        (b.start.line, b.start.character) <= (a.end.line, a.end.character)
    )


def main(timeout: float = DEFAULT_TIMEOUT) -> int:
    checker.timeout = timeout
    try:
        server.start_io()
    finally:
        checker.close()
    return 0
