"""The `torchlint` command through its real entry point: output, exit codes, config, bad input, fixing."""

from __future__ import annotations

import json
import os
import stat
import textwrap


BUGGY = textwrap.dedent(
    """\
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    """
)
CLEAN = textwrap.dedent(
    """\
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    """
)


def write(tmp_path, name, text, mode="w"):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_reports_path_line_col_code(tmp_path, run_cli):
    write(tmp_path, "train.py", BUGGY)
    r = run_cli("train.py", cwd=tmp_path)
    assert r.returncode == 1
    first = r.stdout.splitlines()[0]
    assert first.startswith("train.py:4:5: TL004 [unsafe fix] `optimizer.step()` runs in a loop")
    assert "Found 1 problem in 1 file." in r.stdout


def test_clean_file_exit_zero(tmp_path, run_cli):
    write(tmp_path, "train.py", CLEAN)
    r = run_cli("train.py", cwd=tmp_path)
    assert (r.returncode, r.stdout.strip()) == (0, "All checks passed (1 file).")


def test_default_path_is_cwd_and_directories_recurse(tmp_path, run_cli):
    write(tmp_path, "pkg/sub/train.py", BUGGY)
    write(tmp_path, "pkg/notes.txt", BUGGY)
    r = run_cli(cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout.splitlines()[0].startswith(os.path.join("pkg", "sub", "train.py") + ":4:5: TL004")


def test_json_contract(tmp_path, run_cli):
    write(tmp_path, "train.py", BUGGY)
    r = run_cli("--format", "json", "train.py", cwd=tmp_path)
    assert r.returncode == 1
    items = json.loads(r.stdout)
    assert len(items) == 1
    item = items[0]
    assert set(item) == {"path", "line", "column", "end_line", "end_column", "code", "message", "fix", "url"}
    assert (item["path"], item["line"], item["column"], item["end_line"], item["end_column"], item["code"]) == (
        "train.py", 4, 5, 4, 21, "TL004")
    assert item["fix"]["applicability"] == "unsafe"
    assert item["fix"]["edits"] == [
        {"line": 5, "column": 1, "end_line": 5, "end_column": 1, "content": "    optimizer.zero_grad()\n"}
    ]


def test_select_ignore_and_extend_select(tmp_path, run_cli):
    write(tmp_path, "train.py", BUGGY)
    assert run_cli("--select", "TL001", "train.py", cwd=tmp_path).returncode == 0
    assert run_cli("--select", "TL004", "train.py", cwd=tmp_path).returncode == 1
    assert run_cli("--ignore", "TL004", "train.py", cwd=tmp_path).returncode == 0
    assert run_cli("--select", "TL001", "--extend-select", "TL00", "train.py", cwd=tmp_path).returncode == 1


def test_unknown_select_code_is_usage_error(tmp_path, run_cli):
    write(tmp_path, "train.py", BUGGY)
    r = run_cli("--select", "TL999X", "train.py", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().startswith("torchlint: error: unknown rule code 'TL999X' in --select")
    assert r.stdout == ""


def test_missing_path(tmp_path, run_cli):
    r = run_cli("nope.py", cwd=tmp_path)
    assert (r.returncode, r.stderr.strip()) == (2, "torchlint: error: nope.py: no such file or directory")


def test_bad_option_is_one_line_exit_2(tmp_path, run_cli):
    r = run_cli("--format", "xml", cwd=tmp_path)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


def test_exit_zero(tmp_path, run_cli):
    write(tmp_path, "train.py", BUGGY)
    r = run_cli("--exit-zero", "train.py", cwd=tmp_path)
    assert r.returncode == 0 and "TL004" in r.stdout


def test_syntax_error_reported_and_others_checked(tmp_path, run_cli):
    write(tmp_path, "a_broken.py", "def f(:\n    for b in data:\n        loss.backward()\n")
    write(tmp_path, "b_train.py", BUGGY)
    r = run_cli(".", "-q", cwd=tmp_path)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert lines[0] == "a_broken.py:1:7: TL901 syntax error: invalid syntax; file not checked"
    assert lines[1].startswith("b_train.py:4:5: TL004")
    assert "Traceback" not in r.stderr


def test_python36_async_keyword_argument_is_a_syntax_error_at_the_keyword(tmp_path, run_cli):
    # `tensor.cuda(async=True)`, common in training scripts written for Python <= 3.6 (bearpaw/pytorch-classification,
    # haitongli/knowledge-distillation-pytorch): `async` is a keyword since 3.7, the file cannot run
    src = "for x, y in loader:\n    x, y = x.cuda(), y.cuda(async=True)\n    model(x).sum().backward()\n    opt.step()\n"
    write(tmp_path, "train.py", src)
    r = run_cli("train.py", "-q", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout == "train.py:2:29: TL901 syntax error: invalid syntax; file not checked\n"


def test_non_utf8_file(tmp_path, run_cli):
    write(tmp_path, "latin.py", b"x = 1\ns = '\xe9t\xe9'\nloss.backward()\n")
    r = run_cli("latin.py", "-q", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout == "latin.py:2:1: TL900 cannot decode as utf-8: byte 0xe9 at line 2\n"


def test_coding_cookie_is_honoured(tmp_path, run_cli):
    write(tmp_path, "latin.py", b"# -*- coding: latin-1 -*-\ns = '\xe9t\xe9'\n" + BUGGY.encode())
    r = run_cli("latin.py", "-q", cwd=tmp_path)
    assert r.stdout.startswith("latin.py:6:5: TL004")


def test_a_codec_registered_by_a_package_is_read_as_utf8(tmp_path, run_cli):
    # `future-fstrings` registers its codec at start-up: it reads UTF-8, so the file is checked as UTF-8, and a fix
    # writes UTF-8 back under the same cookie
    write(tmp_path, "ff.py", "# -*- coding: future_fstrings -*-\ns = f'\u00e9t\u00e9 {1}'\n".encode() + BUGGY.encode())
    r = run_cli("ff.py", "-q", cwd=tmp_path)
    assert r.stdout.startswith("ff.py:6:5: TL004"), r.stdout
    assert run_cli("ff.py", "-q", "--fix", "--unsafe-fixes", cwd=tmp_path).returncode == 0
    fixed = (tmp_path / "ff.py").read_bytes()
    assert fixed.startswith("# -*- coding: future_fstrings -*-\ns = f'\u00e9t\u00e9 {1}'\n".encode()) and b"zero_grad" in fixed
    # a cookie naming no codec, on bytes that are not UTF-8 either, is still refused
    write(tmp_path, "bad.py", b"# -*- coding: no_such_codec -*-\ns = '\xe9'\n")
    r = run_cli("bad.py", "-q", cwd=tmp_path)
    assert r.stdout.startswith("bad.py:1:1: TL900 invalid encoding declaration"), r.stdout


def test_null_bytes(tmp_path, run_cli):
    write(tmp_path, "bin.py", b"x = 1\n\x00\x01\x02")
    r = run_cli("bin.py", "-q", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout == "bin.py:2:1: TL900 file contains null bytes; it is not Python source\n"


def test_empty_file_and_empty_directory(tmp_path, run_cli):
    write(tmp_path, "empty.py", "")
    assert run_cli("empty.py", cwd=tmp_path).returncode == 0
    (tmp_path / "nothing").mkdir()
    r = run_cli("nothing", cwd=tmp_path)
    assert (r.returncode, r.stdout.strip()) == (0, "All checks passed (0 files).")


def test_noqa(tmp_path, run_cli):
    write(tmp_path, "a.py", BUGGY.replace("optimizer.step()", "optimizer.step()  # noqa: TL004"))
    write(tmp_path, "b.py", BUGGY.replace("optimizer.step()", "optimizer.step()  # noqa"))
    write(tmp_path, "c.py", BUGGY.replace("optimizer.step()", "optimizer.step()  # noqa: TL001"))
    r = run_cli(".", "-q", cwd=tmp_path)
    assert [line.split(":")[0] for line in r.stdout.splitlines()] == ["c.py"]


def test_pyproject_config(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", '[tool.torchlint]\nignore = ["TL004"]\nexclude = ["vendored"]\n'
          '[tool.torchlint.per-file-ignores]\n"legacy/*.py" = ["TL005"]\n')
    write(tmp_path, "train.py", BUGGY)
    write(tmp_path, "vendored/train.py", BUGGY)
    accum = ("optimizer = torch.optim.SGD(m.parameters(), lr=0.1)\n"
             "for i, (x, y) in enumerate(d):\n    l = crit(m(x), y)\n    l.backward()\n"
             "    if i % k == 0:\n        optimizer.step()\n        optimizer.zero_grad()\n")
    write(tmp_path, "legacy/old.py", accum)
    write(tmp_path, "new/old.py", accum)
    r = run_cli("-q", cwd=tmp_path)
    assert r.stdout == "new/old.py:4:5: TL005 [unsafe fix] " + r.stdout.split("TL005 [unsafe fix] ", 1)[1]
    assert r.returncode == 1


def test_pyproject_unknown_key(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", "[tool.torchlint]\nselct = ['TL001']\n")
    write(tmp_path, "train.py", BUGGY)
    r = run_cli(cwd=tmp_path)
    assert r.returncode == 2
    assert "unknown key 'selct' in [tool.torchlint]" in r.stderr


def test_pyproject_docs_url_must_be_a_url(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", "[tool.torchlint]\ndocs-url = 3\n")
    write(tmp_path, "train.py", BUGGY)
    r = run_cli(cwd=tmp_path)
    assert r.returncode == 2 and "'docs-url' in [tool.torchlint]" in r.stderr and "must be a URL" in r.stderr


def test_pyproject_unknown_code(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", "[tool.torchlint]\nselect = ['XY1']\n")
    write(tmp_path, "train.py", BUGGY)
    r = run_cli(cwd=tmp_path)
    assert r.returncode == 2 and "unknown rule code 'XY1'" in r.stderr


def test_explicit_config_file(tmp_path, run_cli):
    write(tmp_path, "cfg/pyproject.toml", "[tool.torchlint]\nselect = ['TL001']\n")
    write(tmp_path, "train.py", BUGGY)
    assert run_cli("--config", "cfg/pyproject.toml", "train.py", cwd=tmp_path).returncode == 0
    r = run_cli("--config", "missing.toml", "train.py", cwd=tmp_path)
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_gitignore_and_default_excludes(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    write(tmp_path, ".gitignore", "generated/\n*_tmp.py\n")
    write(tmp_path, "generated/train.py", BUGGY)
    write(tmp_path, "x_tmp.py", BUGGY)
    write(tmp_path, ".venv/lib/train.py", BUGGY)
    write(tmp_path, "build/train.py", BUGGY)
    write(tmp_path, "src/train.py", BUGGY)
    r = run_cli("-q", cwd=tmp_path)
    assert [line.split(":")[0] for line in r.stdout.splitlines()] == ["src/train.py"]
    r = run_cli("-q", "--no-respect-gitignore", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in r.stdout.splitlines()) == ["generated/train.py", "src/train.py", "x_tmp.py"]


def test_rule_command(run_cli):
    r = run_cli("rule", "TL001")
    assert r.returncode == 0
    assert r.stdout.startswith("# TL001 `backward-on-accumulated-total`")
    assert "Trying to backward through the graph a second time" in r.stdout
    r = run_cli("rule", "--all")
    from torchlint.rules import ALL_RULES

    assert [line.split()[0] for line in r.stdout.splitlines()] == [rule.code for rule in ALL_RULES]
    assert len(ALL_RULES) == 11
    assert run_cli("rule", "TL404").returncode == 2


def test_fix_safe_only_by_default(tmp_path, run_cli):
    src = "for x in loader:\n    loss = f(x)\n    loss.backward(retain_graph=True)\n    optimizer.step()\n"
    path = write(tmp_path, "t.py", src)
    r = run_cli("--fix", "t.py", cwd=tmp_path)
    assert path.read_text() == src.replace("retain_graph=True", "")
    assert r.returncode == 1  # the unsafe TL004 finding remains
    assert "Fixed 1 problem." in r.stdout and "TL004" in r.stdout


def test_fix_unsafe_and_idempotent(tmp_path, run_cli):
    path = write(tmp_path, "t.py", BUGGY)
    r = run_cli("--fix", "--unsafe-fixes", "t.py", cwd=tmp_path)
    assert r.returncode == 0, r.stdout
    once = path.read_text()
    assert once == BUGGY + "    optimizer.zero_grad()\n"
    r = run_cli("--fix", "--unsafe-fixes", "t.py", cwd=tmp_path)
    assert path.read_text() == once and r.returncode == 0


def test_diff_writes_nothing(tmp_path, run_cli):
    path = write(tmp_path, "t.py", BUGGY)
    r = run_cli("--diff", "--unsafe-fixes", "t.py", cwd=tmp_path)
    assert r.returncode == 1
    assert path.read_text() == BUGGY
    assert "--- a/t.py\n+++ b/t.py\n" in r.stdout and "+    optimizer.zero_grad()\n" in r.stdout
    write(tmp_path, "c.py", CLEAN)
    assert run_cli("--diff", "--unsafe-fixes", "c.py", cwd=tmp_path).returncode == 0


def test_fix_keeps_crlf_bom_and_mode(tmp_path, run_cli):
    data = ("\ufeff" + BUGGY).replace("\n", "\r\n").encode("utf-8")
    path = write(tmp_path, "t.py", data)
    path.chmod(0o755)
    run_cli("--fix", "--unsafe-fixes", "t.py", cwd=tmp_path)
    out = path.read_bytes()
    assert out.startswith(b"\xef\xbb\xbf")
    assert out.endswith(b"    optimizer.step()\r\n    optimizer.zero_grad()\r\n")
    assert b"\n" not in out.replace(b"\r\n", b"")
    assert stat.S_IMODE(path.stat().st_mode) == 0o755


def test_fix_never_touches_unparsable_file(tmp_path, run_cli):
    src = "for x in y:\n    loss.backward(retain_graph=True)\n    def (\n"
    path = write(tmp_path, "t.py", src)
    r = run_cli("--fix", "--unsafe-fixes", "t.py", cwd=tmp_path)
    assert path.read_text() == src
    assert r.returncode == 1 and "TL901" in r.stdout


def test_python_dash_m(tmp_path, python):
    import subprocess

    write(tmp_path, "t.py", BUGGY)
    r = subprocess.run([python, "-m", "torchlint", "-q", "t.py"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout.startswith("t.py:4:5: TL004")


def test_fix_keeps_the_last_line_break_of_a_cr_only_file(tmp_path, run_cli):
    """libcst drops a final lone `\\r` when it writes a module back: a fixed `\\r`-only file keeps its last one."""
    from tests.conftest import ROOT

    path = write(tmp_path, "t.py", (ROOT / "tests" / "odd_inputs" / "cr_only.py").read_bytes())
    r = run_cli("--fix", "--unsafe-fixes", "--no-cache", "t.py", cwd=tmp_path)
    assert "Fixed 2 problems." in r.stdout, r.stdout + r.stderr
    out = path.read_bytes()
    assert out.endswith(b"    running += loss.item()\r") and b"\n" not in out
