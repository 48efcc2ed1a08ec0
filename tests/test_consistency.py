"""One answer, whichever way it is asked: the CLI in every format, cold and warm, one job or two,
flake8, the Python API and the language server report the same findings at the same places; `--diff` applied
with `patch` equals `--fix`; the configuration answers the same from any folder and any spelling of the path.

Inputs: the fixtures' bad.py, the odd files in tests/odd_inputs/ (CRLF, lone CR, BOM, latin-1 with a coding
cookie, tabs, a form feed, no final newline, non-ASCII names and strings, a notebook of several cells) and a
20,000-line file built here.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
from lsprotocol import types as lsp

from tests.conftest import ROOT
from tests.helpers import start_language_server
from torchlint.engine import decode, lint_source
from torchlint.source.lines import split_lines

ODD = ROOT / "tests" / "odd_inputs"
FORMATS = ("text", "json", "sarif", "github")


def _big_file(every: int = 25) -> str:
    """20,000 lines: plain functions, and every `every`-th a training loop with two findings."""
    parts = ["import torch\n\n"]
    lines = 2
    i = 0
    while lines < 19_990:
        if i % every == 0:
            part = (f"def train_{i}(model, loader, optimizer, crit):\n    running = 0.0\n    for x, y in loader:\n"
                    "        loss = crit(model(x), y)\n        loss.backward()\n        optimizer.step()\n"
                    "        running += loss\n    print(running)\n\n\n")
        else:
            part = f"def helper_{i}(a, b):\n    c = a + b\n    return c * {i}\n\n\n"
        parts.append(part)
        lines += part.count("\n")
        i += 1
    return "".join(parts)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("consistency")
    shutil.copytree(ODD, root / "odd")
    for bad in sorted((ROOT / "fixtures").glob("TL*/*/bad.py")):
        shutil.copy(bad, root / f"{bad.parent.parent.name}_{bad.parent.name}.py")
    (root / "big.py").write_text(_big_file(every=10_000), encoding="utf-8")  # two findings
    return root


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchlint", "--isolated", *args], cwd=cwd,
                          capture_output=True, timeout=600)


def places(fmt: str, out: str) -> set[tuple]:
    """(path, cell, line, column, code) of every finding in one format's output."""
    found: set[tuple] = set()
    if fmt == "json":
        for d in json.loads(out):
            found.add((d["path"], d.get("cell"), d["line"], d["column"], d["code"]))
    elif fmt == "sarif":
        for r in json.loads(out)["runs"][0]["results"]:
            loc = r["locations"][0]["physicalLocation"]
            region = loc["region"]
            found.add((unquote(loc["artifactLocation"]["uri"]), (r.get("properties") or {}).get("cell"),
                       region["startLine"], region["startColumn"], r["ruleId"]))
    elif fmt == "github":
        for line in out.splitlines():
            m = re.match(r"::error file=([^,]*),(?:line=(\d+),col=(\d+),)?.*?::(?:cell (\d+), )?(TL\d+)", line)
            assert m, line
            path, ln, col, cell, code = m.groups()
            found.add((path.replace("%2C", ",").replace("%3A", ":"), int(cell) if cell else None,
                       int(ln) if ln else None, int(col) if col else None, code))
    else:
        for line in out.splitlines():
            m = re.match(r"(.+?):(?:cell (\d+):)?(\d+):(\d+): (TL\d+) ", line)
            if m:
                path, cell, ln, col, code = m.groups()
                found.add((path, int(cell) if cell else None, int(ln), int(col), code))
    return found


def _comparable(fmt: str, found: set[tuple]) -> set[tuple]:
    """GitHub annotations of notebook findings carry the cell in the message, not line/column (they would point
    into the JSON): compare them by path, cell and code only."""
    return {(p, c, None, None, code) if c is not None else (p, c, ln, col, code) for p, c, ln, col, code in found}


def test_every_format_reports_the_same_findings(tree):
    """The CLI's findings are identical in text, json, sarif and github (same set, same positions)."""
    results = {}
    for fmt in FORMATS:
        out = cli("--no-cache", "--exit-zero", "--format", fmt, "-q", ".", cwd=tree)
        assert out.returncode == 0, out.stderr
        results[fmt] = places(fmt, out.stdout.decode())
    assert len(results["json"]) > 40
    assert any(cell for _, cell, *_ in results["json"])  # the notebook's cells are there
    for fmt in ("text", "sarif"):
        assert results[fmt] == results["json"], fmt
    assert results["github"] == _comparable("github", results["json"])


def test_cold_equals_warm_in_every_format(tree, tmp_path):
    """Cold and warm output are the same bytes in every format (a notebook finding read from the cache keeps its
    cell: `nb.ipynb:cell 4:4:5`, not `nb.ipynb:4:5`)."""
    work = tmp_path / "w"
    shutil.copytree(tree, work)
    for fmt in FORMATS:
        cold = cli("--exit-zero", "--format", fmt, ".", cwd=work)
        warm = cli("--exit-zero", "--format", fmt, ".", cwd=work)
        uncached = cli("--no-cache", "--exit-zero", "--format", fmt, ".", cwd=work)
        assert cold.stdout == warm.stdout == uncached.stdout, fmt
    assert b"several_cells.ipynb:cell 4:" in cli("--exit-zero", ".", cwd=work).stdout


def test_one_job_equals_two(tree):
    one = cli("--no-cache", "--exit-zero", "--format", "json", "--jobs", "1", ".", cwd=tree)
    two = cli("--no-cache", "--exit-zero", "--format", "json", "--jobs", "2", ".", cwd=tree)
    assert one.stdout == two.stdout and one.stdout


def _cli_json(tree: Path) -> list[dict]:
    return json.loads(cli("--no-cache", "--exit-zero", "--format", "json", ".", cwd=tree).stdout)


def test_flake8_equals_the_cli(tree):
    out = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select", "TL", "--format",
                          "%(path)s:%(row)d:%(col)d: %(code)s", "."], cwd=tree, capture_output=True, text=True,
                         timeout=600)
    got = set()
    for line in out.stdout.splitlines():
        path, row, col, code = re.match(r"(.+?):(\d+):(\d+): (TL\d+)", line).groups()
        got.add((Path(path).as_posix().removeprefix("./"), int(row), int(col), code))
    want = {(d["path"], d["line"], d["column"], d["code"]) for d in _cli_json(tree) if d["path"].endswith(".py")}
    assert got == want and want


def test_the_api_equals_the_cli(tree):
    """lint_source gives the CLI's positions, `\\r`-only files included."""
    want = {(d["path"], d["line"], d["column"], d["code"]) for d in _cli_json(tree) if d["path"].endswith(".py")}
    got = set()
    for path in sorted(tree.rglob("*.py")):
        rel = path.relative_to(tree).as_posix()
        got |= {(rel, d.line, d.column, d.code) for d in lint_source(decode(path.read_bytes()).text, rel)}
    assert got == want


def test_lone_cr_line_numbers_match_python():
    """Files with old-Mac `\\r`-only line endings get Python's line numbers: each `\\r` is a line break, as for
    Python's parser (so a `# noqa` applies to the line it is on, not the one below)."""
    text = (ODD / "cr_only.py").read_bytes().decode()
    assert [(d.line, d.code) for d in lint_source(text, "cr_only.py")] == [(7, "TL004"), (8, "TL007")]
    noqa_above = text.replace("    optimizer.step()\r", "    optimizer.step()\r    pass  # noqa: TL007\r")
    assert [(d.line, d.code) for d in lint_source(noqa_above, "x.py")] == [(7, "TL004"), (9, "TL007")]


async def _lsp_diagnostics(root: Path, files: list[Path]) -> dict[str, list[lsp.Diagnostic]]:
    client, queue, _ = await start_language_server(root)
    out = {}
    for path in files:
        text = decode(path.read_bytes()).text
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(
            uri=path.as_uri(), language_id="python", version=1, text=text)))
        published = await asyncio.wait_for(queue.get(), 120)
        out[path.relative_to(root).as_posix()] = published.diagnostics
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return out


def test_language_server_equals_the_cli(tree):
    """Positions in UTF-16 code units, as the protocol counts them (an emoji before a finding is two)."""
    files = [p for p in sorted(tree.rglob("*.py")) if p.name != "big.py"]
    published = asyncio.run(_lsp_diagnostics(tree, files))
    want: set[tuple] = set()
    for d in _cli_json(tree):
        if not d["path"].endswith(".py") or d["path"] == "big.py":
            continue
        text = decode((tree / d["path"]).read_bytes()).text
        line = split_lines(text)[d["line"] - 1]
        want.add((d["path"], d["line"] - 1, len(line[: d["column"] - 1].encode("utf-16-le")) // 2, d["code"]))
    got = {(path, x.range.start.line, x.range.start.character, x.code) for path, ds in published.items() for x in ds}
    assert got == want
    assert any(path == "odd/unicode_names.py" and char == 15 for path, _, char, _ in got)  # 14 code points


def test_diff_applied_with_patch_equals_fix(tree, tmp_path):
    """`--diff` applied with `patch` applies exactly (no fuzz) and gives what `--fix` writes, on a last line
    without newline, a `\\r`-only file, a latin-1 file and a BOM file; a second `--fix` changes nothing."""
    if shutil.which("patch") is None:
        pytest.skip("the patch program is not installed")
    patched, fixed = tmp_path / "patched", tmp_path / "fixed"
    shutil.copytree(tree, patched)
    shutil.copytree(tree, fixed)
    diff = cli("--no-cache", "--diff", "--unsafe-fixes", ".", cwd=patched)
    assert diff.returncode == 1 and diff.stdout
    applied = subprocess.run(["patch", "-p1", "--forward", "--no-backup-if-mismatch", "-F", "0"], cwd=patched,
                             input=diff.stdout, capture_output=True, timeout=120)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert b"fuzz" not in applied.stdout.lower()
    cli("--no-cache", "--fix", "--unsafe-fixes", "-q", ".", cwd=fixed)
    for path in sorted(fixed.rglob("*")):
        if path.is_file() and ".torchlint_cache" not in path.parts:
            assert (patched / path.relative_to(fixed)).read_bytes() == path.read_bytes(), path.name
    before = {p: p.read_bytes() for p in fixed.rglob("*.py")}
    cli("--no-cache", "--fix", "--unsafe-fixes", "-q", ".", cwd=fixed)
    assert {p: p.read_bytes() for p in fixed.rglob("*.py")} == before
    latin = (fixed / "odd" / "latin1.py").read_bytes()
    assert "d\u00e9j\u00e0 vu".encode("latin-1") in latin and b".item()" in latin


def test_json_on_a_large_file_completes_like_text(tmp_path):
    """`--format json`/`sarif` on a 20,000-line file report its findings within the 60 s per-file limit (no TL904),
    each fix's edits placed at its finding."""
    tree = tmp_path
    (tree / "big.py").write_text(_big_file(every=25), encoding="utf-8")  # 300 findings
    for fmt in ("json", "sarif"):
        out = cli("--no-cache", "--exit-zero", "--file-timeout", "60", "--format", fmt, "big.py", cwd=tree)
        assert {code for *_, code in places(fmt, out.stdout.decode())} == {"TL004", "TL007"}, fmt
    items = json.loads(cli("--no-cache", "--exit-zero", "--format", "json", "big.py", cwd=tree).stdout)
    assert len(items) > 250
    for d in items:  # each fix's edit sits right at its finding
        assert all(0 <= e["line"] - d["line"] <= 2 for e in d["fix"]["edits"]), d


@pytest.fixture
def configured(tmp_path) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchlint]\nextend-exclude = ["sub/skip"]\n[tool.torchlint.per-file-ignores]\n"sub/quiet.py" = ["TL004"]\n'
    )
    bug = "for x in loader:\n    loss.backward()\n    optimizer.step()\n"
    for rel in ("sub/skip/x.py", "sub/quiet.py", "sub/loud.py", "top.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(bug)
    return tmp_path


def test_configuration_is_the_same_from_any_folder_and_path(configured):
    """`exclude`/`extend-exclude` are matched from the configuration's folder, like per-file-ignores and like ruff,
    not against the path as typed: `torchlint sub` skips sub/skip/x.py too."""
    def found(*args: str, cwd: Path) -> set[str]:
        out = subprocess.run([sys.executable, "-m", "torchlint", "--no-cache", "--format", "json", *args],
                             cwd=cwd, capture_output=True, text=True, timeout=120)
        return {str((cwd / d["path"]).resolve().relative_to(configured.resolve())) + ":" + d["code"]
                for d in json.loads(out.stdout)}

    sub = configured / "sub"
    expected = {"sub/loud.py:TL004"}
    assert found("sub", cwd=configured) == expected
    assert found(str(sub), cwd=configured) == expected
    assert found(".", cwd=sub) == expected
    assert found("sub/", cwd=configured) == expected
    assert found(".", cwd=configured) == expected | {"top.py:TL004"}


def test_language_server_honours_per_file_ignores(configured):
    """The language server honours per-file-ignores, as the CLI does."""
    published = asyncio.run(_lsp_diagnostics(configured, [configured / "sub" / "quiet.py",
                                                          configured / "sub" / "loud.py"]))
    assert [d.code for d in published["sub/quiet.py"]] == []
    assert [d.code for d in published["sub/loud.py"]] == ["TL004"]
