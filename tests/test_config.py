"""The one reader of configuration (torchlint.config): a configuration is understood, or the run stops with one
line on stderr and exit 2; never a traceback, never the defaults in its place. flake8 and the language server say
so in a diagnostic instead."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from lsprotocol import types as lsp

from tests.helpers import start_language_server

BUGGY = "for x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"
FIXABLE = ("running = 0.0\nfor x, y in loader:\n    loss = crit(model(x), y)\n    optimizer.zero_grad()\n"
           "    loss.backward()\n    optimizer.step()\n    running += loss\nprint(running)\n")


def _one_error_line(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("torchlint: error: "), r.stderr
    assert "Traceback" not in r.stderr and all(w in lines[0] for w in words), lines


BROKEN = {
    "invalid TOML": b"[tool.torchlint\nignore = ['TL004']\n",
    "not UTF-8": b"[tool.torchlint]\n# caf\xe9\nignore = ['TL004']\n",
    "tool is not a table": b"tool = 1\n",
    "torchlint is not a table": b"[tool]\ntorchlint = 'yes'\n",
    "a code that is not a string": b"[tool.torchlint.per-file-ignores]\n'*.py' = [4]\n",
    "per-file-ignores entry not a list": b"[tool.torchlint.per-file-ignores]\n'*.py' = 'TL004'\n",
    "a pattern given a table": b"[tool.torchlint.per-file-ignores]\n'*.py' = {a = 1}\n",
    "select not a list": b"[tool.torchlint]\nselect = 'TL004'\n",
    "exclude not strings": b"[tool.torchlint]\nexclude = [1]\n",
}


@pytest.mark.parametrize("content", list(BROKEN.values()), ids=list(BROKEN))
def test_a_configuration_that_cannot_be_read_stops_the_run(tmp_path, run_cli, content):
    """An invalid pyproject.toml was skipped: the defaults were used, its ignored rules reported, and --fix
    rewrote folders it excludes. A non-UTF-8 one, or a code that is not a string, was a traceback."""
    (tmp_path / "pyproject.toml").write_bytes(content)
    sub = tmp_path / "pkg"
    sub.mkdir()
    (sub / "train.py").write_text(FIXABLE)
    for args in (("pkg",), ("--fix", "pkg"), ("pkg/train.py",)):
        r = run_cli("--no-cache", *args, cwd=tmp_path)
        _one_error_line(r, "pyproject.toml")
        assert r.stdout == ""
    assert (sub / "train.py").read_text() == FIXABLE  # nothing written under a configuration not understood


def test_a_broken_configuration_given_with_config_is_an_error_too(tmp_path, run_cli):
    (tmp_path / "settings.toml").write_bytes(b"ignore = ['TL004'\n")
    (tmp_path / "t.py").write_text(BUGGY)
    _one_error_line(run_cli("--config", "settings.toml", "t.py", cwd=tmp_path), "settings.toml", "invalid TOML")


def test_a_broken_pyproject_above_the_project_is_an_error(tmp_path, run_cli):
    """The pyproject.toml files on the way up are read until one has [tool.torchlint]: one that cannot be read
    there may be the configuration, so it stops the run."""
    (tmp_path / "pyproject.toml").write_bytes(b"\xff\xfe[tool.torchlint]\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "t.py").write_text(BUGGY)
    _one_error_line(run_cli("--no-cache", "t.py", cwd=project), str(tmp_path / "pyproject.toml"), "UTF-8")


def test_isolated_reads_no_configuration(tmp_path, run_cli):
    (tmp_path / "pyproject.toml").write_bytes(b"[tool.torchlint\n")
    (tmp_path / "t.py").write_text(BUGGY)
    assert run_cli("--isolated", "--no-cache", "-q", "t.py", cwd=tmp_path).returncode == 1


def test_per_file_ignores_all_ignores_every_rule(tmp_path, run_cli):
    """`"ALL"` was accepted in per-file-ignores and ignored nothing; as in ruff, it means every rule."""
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint.per-file-ignores]\n"legacy/*" = ["ALL"]\n')
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "old.py").write_text(BUGGY)
    (tmp_path / "new.py").write_text(BUGGY)
    r = run_cli("--no-cache", "-q", ".", cwd=tmp_path)
    assert [line.split(":")[0] for line in r.stdout.splitlines()] == ["new.py"]


def test_codes_for_with_all():
    from pathlib import Path

    from torchlint.config import Config

    cfg = Config(root=Path("/p"), per_file_ignores={"a.py": ("ALL",), "b.py": ("TL00",)})
    assert cfg.codes_for(Path("/p/a.py")) == [] and cfg.codes_for(Path("/p/b.py")) == ["TL010", "TL011"]
    assert cfg.codes_for(Path("/p/c.py")) == cfg.codes()


def test_flake8_says_the_configuration_cannot_be_read(tmp_path):
    """flake8 died whole with a traceback on a non-UTF-8 pyproject.toml."""
    (tmp_path / "pyproject.toml").write_bytes(b"[tool.torchlint]\n# caf\xe9\n")
    (tmp_path / "t.py").write_text(BUGGY)
    r = subprocess.run([sys.executable, "-m", "flake8", "--select", "TL", "t.py"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stdout.startswith("t.py:1:1: TL900 cannot read the configuration: "), r.stdout
    assert "pyproject.toml" in r.stdout.splitlines()[0] and "UTF-8" in r.stdout.splitlines()[0]


def test_language_server_publishes_the_configuration_error(tmp_path):
    """The language server published nothing on such a configuration (and all rules on an invalid one)."""
    (tmp_path / "pyproject.toml").write_bytes(b"[tool.torchlint\n")
    (tmp_path / "train.py").write_text(BUGGY)

    async def go():
        client, received, _ = await start_language_server(tmp_path)
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(
            uri=(tmp_path / "train.py").as_uri(), language_id="python", version=1, text=BUGGY)))
        published = await asyncio.wait_for(received.get(), 60)
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()
        return published

    published = asyncio.run(go())
    assert [(d.code, d.range.start.line) for d in published.diagnostics] == [("TL900", 0)]
    message = published.diagnostics[0].message
    assert message.startswith("cannot read the configuration: ") and "invalid TOML" in message
