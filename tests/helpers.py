"""Helpers shared by the tests."""

from __future__ import annotations

import contextlib
import io
import os
import textwrap
from pathlib import Path

from torchlint.engine import fix_source, lint_source, select_rules


def findings(src: str, code: str) -> list[tuple[int, int]]:
    """(line, column) of every `code` finding in the dedented source."""
    text = textwrap.dedent(src)
    found = lint_source(text, "t.py", select_rules([code]))
    # A test source that does not parse would make every negative test pass: it must be valid Python.
    assert not [d for d in found if d.code.startswith("TL9")], [d.message for d in found]
    return [(d.line, d.column) for d in found if d.code == code]


def messages(src: str, code: str) -> list[tuple[int, int, str]]:
    """(line, column, message) of every `code` finding in the dedented source."""
    text = textwrap.dedent(src)
    found = lint_source(text, "t.py", select_rules([code]))
    assert not [d for d in found if d.code.startswith("TL9")], [d.message for d in found]
    return [(d.line, d.column, d.message) for d in found if d.code == code]


def fixed(src: str, code: str, unsafe: bool = True) -> str:
    return fix_source(textwrap.dedent(src), "t.py", select_rules([code]), unsafe=unsafe).text


def lint_in_process(root: Path, *args: str) -> tuple[int, str]:
    """`torchlint --format json --jobs 1 --file-timeout 0 ARGS` in `root`, run in this process: (exit code, output). The console
    script's command line, without a new interpreter per run (for tests that run it hundreds of times)."""
    from torchlint.cli import main

    out, before = io.StringIO(), os.getcwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(out):
            # no time limit: a limited file is checked in a worker process, out of this process's reach
            code = main(["--format", "json", "--jobs", "1", "--file-timeout", "0", *args])
    finally:
        os.chdir(before)
    return code, out.getvalue()


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
