"""Helpers shared by the rule tests."""

from __future__ import annotations

import textwrap

from torchlint.engine import fix_source, lint_source, select_rules


def findings(src: str, code: str) -> list[tuple[int, int]]:
    """(line, column) of every `code` finding in the dedented source."""
    text = textwrap.dedent(src)
    found = lint_source(text, "t.py", select_rules([code]))
    # A test source that does not parse would make every negative test pass: it must be valid Python.
    assert not [d for d in found if d.code.startswith("TL9")], [d.message for d in found]
    return [(d.line, d.column) for d in found if d.code == code]


def fixed(src: str, code: str, unsafe: bool = True) -> str:
    return fix_source(textwrap.dedent(src), "t.py", select_rules([code]), unsafe=unsafe).text


async def start_language_server(root, *server_args: str):
    """A real LSP client talking to `torchlint server [server_args]` over stdio, initialised on `root`; returns the
    client, the queue its published diagnostics arrive on, and the server's initialize result. The messages the
    server asks the editor to show (window/showMessage) are kept in `client.shown`."""
    import asyncio
    import sys

    from lsprotocol import types as lsp
    from pygls.lsp.client import BaseLanguageClient

    client = BaseLanguageClient("torchlint-tests", "1")
    queue: asyncio.Queue = asyncio.Queue()

    client.shown = []

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
        queue.put_nowait(params)

    @client.feature(lsp.WINDOW_SHOW_MESSAGE)
    def on_message(params: lsp.ShowMessageParams) -> None:
        client.shown.append(params)

    await client.start_io(sys.executable, "-m", "torchlint", "server", *server_args, cwd=str(root))
    result = await client.initialize_async(lsp.InitializeParams(capabilities=lsp.ClientCapabilities(),
                                                                root_uri=root.as_uri()))
    client.initialized(lsp.InitializedParams())
    return client, queue, result
