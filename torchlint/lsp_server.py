"""`torchlint server`: a Language Server (stdio) for editors, built on pygls.

Diagnostics on open, change and save; code actions that apply a finding's fix (safe fixes as preferred
quick-fixes, unsafe ones labelled "unsafe"), and "Fix all safe torchlint problems" for the whole document.
Configuration comes from the nearest pyproject.toml of the document, as for the command.
"""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from torchlint import __version__
from torchlint.batch import cached_project
from torchlint.config import ConfigError, find_pyproject, load
from torchlint.diagnostic import Diagnostic
from torchlint.engine import fix_source, lint_source, select_rules
from torchlint.source.lines import split_lines
from torchlint.rule_docs import doc_url

SOURCE = "torchlint"

server = LanguageServer("torchlint", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Full)


def _rules(path: str | None):
    """The rules enabled for this document, per-file-ignores included, from the configuration the command
    would use for it."""
    try:
        cfg = load(find_pyproject(Path(path))) if path else None
    except ConfigError:
        cfg = None
    return select_rules(cfg.codes_for(Path(path))) if cfg is not None and path else select_rules()


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


def _analyse(uri: str, text: str) -> tuple[list[Diagnostic], list[lsp.Diagnostic]]:
    path = to_fs_path(uri)
    project = cached_project(path) if path else None
    found = lint_source(text, path or uri, _rules(path), with_edits=True, project=project)
    lines = split_lines(text)
    out = []
    for d in found:
        out.append(lsp.Diagnostic(
            range=_range(lines, d),
            message=d.message,
            severity=lsp.DiagnosticSeverity.Error if d.code.startswith("TL9") else lsp.DiagnosticSeverity.Warning,
            code=d.code,
            code_description=lsp.CodeDescription(href=doc_url(d.code)),
            source=SOURCE,
        ))
    return found, out


def _publish(ls: LanguageServer, uri: str, version: int | None) -> None:
    doc = ls.workspace.get_text_document(uri)
    _, diagnostics = _analyse(uri, doc.source)
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=diagnostics))


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: LanguageServer, params: lsp.DidOpenTextDocumentParams) -> None:
    _publish(ls, params.text_document.uri, params.text_document.version)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: LanguageServer, params: lsp.DidChangeTextDocumentParams) -> None:
    _publish(ls, params.text_document.uri, params.text_document.version)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: LanguageServer, params: lsp.DidSaveTextDocumentParams) -> None:
    _publish(ls, params.text_document.uri, None)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: LanguageServer, params: lsp.DidCloseTextDocumentParams) -> None:
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))


@server.feature(
    lsp.TEXT_DOCUMENT_CODE_ACTION,
    lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.SourceFixAll]),
)
def code_actions(ls: LanguageServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    uri = params.text_document.uri
    doc = ls.workspace.get_text_document(uri)
    found, diagnostics = _analyse(uri, doc.source)
    wanted = params.context.only
    actions: list[lsp.CodeAction] = []
    if not wanted or lsp.CodeActionKind.QuickFix in wanted:
        for d, diag in zip(found, diagnostics):
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
        path = to_fs_path(uri)
        fixed = fix_source(doc.source, path or uri, _rules(path), unsafe=False,
                           project=cached_project(path) if path else None)
        if fixed.text != doc.source:
            lines = split_lines(doc.source, keepends=True)
            end = lsp.Position(line=len(lines), character=0)
            actions.append(lsp.CodeAction(
                title="Fix all safe torchlint problems",
                kind=lsp.CodeActionKind.SourceFixAll,
                edit=lsp.WorkspaceEdit(changes={uri: [lsp.TextEdit(
                    range=lsp.Range(start=lsp.Position(line=0, character=0), end=end), new_text=fixed.text)]}),
            ))
    return actions


def _overlaps(a: lsp.Range, b: lsp.Range) -> bool:
    return (a.start.line, a.start.character) <= (b.end.line, b.end.character) and (
        (b.start.line, b.start.character) <= (a.end.line, a.end.character)
    )


def main() -> int:
    server.start_io()
    return 0
