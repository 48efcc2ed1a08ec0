"""A small file's diagnostics from the language server while a large file is being edited.

    python benchmarks/lsp_latency.py [--lines 10000] [--rounds 8] [--edit-every 0.3] [--torchlint-path DIR]

Starts `torchlint server` (the real one, over stdio, with pygls's client), opens a training file of `--lines`
lines and waits for its diagnostics (the time of one check of it), then edits it every `--edit-every` seconds
(each edit a new version of the whole text, as an editor sends it) while, `--rounds` times, a 13-line file is
opened (or edited) and the time until its diagnostics arrive is taken. Prints each round's wait, their median and
maximum. `--torchlint-path` runs the server of another checkout (put first on PYTHONPATH), to compare. It prints
figures; it never fails on them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.client import BaseLanguageClient

SMALL = (
    "import torch\n"
    "\n"
    "model = torch.nn.Linear(4, 1)\n"
    "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "criterion = torch.nn.MSELoss()\n"
    "loader = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(10)]\n"
    "\n"
    "for x, y in loader:\n"
    "    optimizer.zero_grad()\n"
    "    loss = criterion(model(x), y)\n"
    "    loss.backward(retain_graph=True)\n"
    "    optimizer.step()\n"
    "print('done')\n"
)

BLOCK = (
    "def train_{i}(model, loader, optimizer, criterion, scheduler):\n"
    "    total = 0.0\n"
    "    for step, (x, y) in enumerate(loader):\n"
    "        optimizer.zero_grad()\n"
    "        out = model(x)\n"
    "        loss = criterion(out, y) + 0.01 * sum(p.pow(2).sum() for p in model.parameters())\n"
    "        loss.backward()\n"
    "        optimizer.step()\n"
    "        scheduler.step()\n"
    "        total += loss\n"
    "        if step % 100 == 0:\n"
    "            print(step, total / (step + 1))\n"
    "    return total\n"
    "\n"
)


def large(lines: int, version: int) -> str:
    blocks = [BLOCK.format(i=i) for i in range(lines // BLOCK.count("\n") + 1)]
    text = "import torch\n" + "".join(blocks)
    return "\n".join(text.splitlines()[: lines - 1]) + f"\nEDIT = {version}\n"


async def main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="torchlint-lsp-bench-"))
    big, small = (root / "big.py").as_uri(), (root / "small.py").as_uri()
    client = BaseLanguageClient("lsp-latency", "1")
    arrived: dict[str, asyncio.Queue] = {big: asyncio.Queue(), small: asyncio.Queue()}

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
        if params.uri in arrived:
            arrived[params.uri].put_nowait((time.perf_counter(), params))

    env = dict(os.environ)
    if args.torchlint_path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [args.torchlint_path, env.get("PYTHONPATH")]))
    import subprocess

    where = subprocess.run([sys.executable, "-c", "import torchlint; print(torchlint.__file__)"], env=env,
                           cwd=str(root), capture_output=True, text=True).stdout.strip()
    print(f"the server's torchlint: {where}")
    await client.start_io(sys.executable, "-m", "torchlint", "server", cwd=str(root), env=env)
    await client.initialize_async(lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), root_uri=root.as_uri()))
    client.initialized(lsp.InitializedParams())

    version = 1
    start = time.perf_counter()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(
        uri=big, language_id="python", version=version, text=large(args.lines, version))))
    when, _ = await asyncio.wait_for(arrived[big].get(), 600)
    print(f"{args.lines}-line file: first diagnostics after {when - start:.2f} s (one check of it, DEBOUNCE included)")

    editing = True

    async def edit_big() -> None:
        nonlocal version
        while editing:
            version += 1
            client.text_document_did_change(lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=big, version=version),
                content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=large(args.lines, version))]))
            await asyncio.sleep(args.edit_every)

    editor = asyncio.ensure_future(edit_big())
    waits = []
    small_version = 0
    for round_ in range(args.rounds):
        await asyncio.sleep(1.0)  # the large file's newest check is under way
        small_version += 1
        text = SMALL + f"# round {round_}\n" if round_ else SMALL
        sent = time.perf_counter()
        if small_version == 1:
            client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(
                uri=small, language_id="python", version=small_version, text=text)))
        else:
            client.text_document_did_change(lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=small, version=small_version),
                content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)]))
        while True:
            when, params = await asyncio.wait_for(arrived[small].get(), 600)
            if params.version == small_version:
                break
        waits.append(when - sent)
        print(f"round {round_ + 1}: the 13-line file's diagnostics ({[d.code for d in params.diagnostics]}) after "
              f"{waits[-1]:.3f} s, the large file at version {version}")
    editing = False
    await editor
    print(f"13-line file while the {args.lines}-line file is edited every {args.edit_every:g} s: median "
          f"{statistics.median(waits):.3f} s, max {max(waits):.3f} s over {len(waits)} rounds "
          f"(DEBOUNCE of 0.2 s included)")
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lines", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--edit-every", type=float, default=0.3)
    p.add_argument("--torchlint-path", help="a checkout whose torchlint the server runs (first on PYTHONPATH)")
    asyncio.run(main(p.parse_args()))
