"""Property test of the configuration reader: for any pyproject.toml (generated TOML documents with the known keys
and wrong types, unknown keys, broken syntax, other encodings), the outcome is a configuration whose findings are
the right ones, or one line on stderr and exit 2; never a traceback. Most examples call the reader and the command
in this process; a few run the real console script."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchlint.rules import rule_codes
from torchlint.config import KNOWN_KEYS, ConfigError, find_pyproject, load

SRC = ("total = 0\nfor i, (x, y) in enumerate(loader):\n    loss = criterion(model(x), y)\n    total = total + loss\n"
       "    total.backward(retain_graph=True)\n    optimizer.step()\n")
FOUND = {"TL001", "TL002", "TL004"}  # what SRC holds with every rule enabled

CODES = st.sampled_from(["TL", "TL0", "TL00", "TL004", "tl001", " TL002 ", "TL9", "TL900", "ALL", "E501", "", "TL999"])
TEXT = st.one_of(CODES, st.text(max_size=8), st.sampled_from(["*.py", "pkg/*", "train.py", "*", "https://x/{code}"]))
SCALAR = st.one_of(TEXT, st.integers(-3, 3), st.booleans(), st.floats(allow_nan=False, allow_infinity=False))
VALUE = st.recursive(SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(TEXT, inner, max_size=3)), max_leaves=8)
KEY = st.one_of(st.sampled_from(sorted(KNOWN_KEYS)), st.text(min_size=1, max_size=6))
PATTERNS = st.sampled_from(["*.py", "pkg/*", "train.py", "*", "other/*", "pkg/train.py", "[", "**"])
WELL_TYPED = {  # values of the right type, mostly (the reader must still check each code and pattern)
    "select": st.lists(CODES, max_size=3), "ignore": st.lists(CODES, max_size=3),
    "extend-select": st.lists(CODES, max_size=2), "exclude": st.lists(PATTERNS, max_size=2),
    "extend-exclude": st.lists(PATTERNS, max_size=2),
    "per-file-ignores": st.dictionaries(PATTERNS, st.lists(CODES, max_size=3), max_size=3),
    "respect-gitignore": st.booleans(), "unsafe-fixes": st.booleans(),
    "docs-url": st.sampled_from(["https://example.org/rules", "https://x/{code}.html", " ", ""]),
}


def _toml(value) -> str:
    """A value as TOML (written here: no TOML writer among the dependencies)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's string escapes are TOML's basic-string escapes
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)} = {_toml(v)}" for k, v in value.items()) + "}"


@st.composite
def documents(draw) -> bytes:
    section = draw(st.dictionaries(KEY, VALUE, max_size=3)) if draw(st.integers(0, 3)) == 0 else {}
    for key in draw(st.lists(st.sampled_from(sorted(WELL_TYPED)), max_size=4, unique=True)):
        section[key] = draw(WELL_TYPED[key])
    head = draw(st.sampled_from(["[tool.torchlint]\n", "[tool]\ntorchlint = 1\n", "tool = 3\n", "[tool.other]\n",
                                 '[project]\nname = "x"\n[tool.torchlint]\n']))
    text = head + "".join(f"{json.dumps(k, ensure_ascii=False)} = {_toml(v)}\n" for k, v in section.items())
    if head.startswith(("[tool]", "tool =")):
        text = head
    if draw(st.integers(0, 4)) == 0:  # a mutation: the syntax broken somewhere, or a character that is no TOML
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["[", "]", "=", '"', "\n", "\x00", "\x7f", "\ufeff", "é", "{"])) + \
            text[at + draw(st.integers(0, 2)):]
    encoding = draw(st.sampled_from(["utf-8"] * 8 + ["utf-8-sig", "utf-16", "latin-1", "cp1252"]))
    return text.encode(encoding, errors="replace")


def _reader(root: Path) -> object:
    """The configuration the command would use for pkg/train.py, or the ConfigError's message."""
    try:
        return load(find_pyproject(root / "pkg" / "train.py"))
    except ConfigError as exc:
        message = str(exc)
        assert message and "\n" not in message and "\r" not in message, repr(message)
        return message


def _command(root: Path, *args: str) -> tuple[int, str, str]:
    from torchlint.cli import main

    out, err, before = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["--format", "json", "--jobs", "1", "--file-timeout", "0", "--no-cache", *args])
    finally:
        os.chdir(before)
    return code, out.getvalue(), err.getvalue()


def _project(content: bytes) -> tempfile.TemporaryDirectory:
    folder = tempfile.TemporaryDirectory()
    root = Path(folder.name)
    (root / "pyproject.toml").write_bytes(content)
    (root / "pkg").mkdir()
    (root / "pkg" / "train.py").write_text(SRC)
    return folder


def _right_outcome(cfg, root: Path, code: int, out: str, err: str) -> None:
    """The command's outcome is what the reader said: its one-line error and exit 2, or the findings of the rules
    the configuration enables for the file, exit 0 or 1 and nothing on stderr."""
    if isinstance(cfg, str):
        assert (code, out, err) == (2, "", f"torchlint: error: {cfg}\n")
        return
    assert err == "" and code in (0, 1)
    found = {d["code"] for d in json.loads(out)}
    assert found == FOUND & set(cfg.codes_for(root / "pkg" / "train.py")), (found, cfg)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(documents())
def test_the_reader_understands_a_configuration_or_says_why_in_one_line(content):
    with _project(content) as folder:
        root = Path(folder)
        cfg = _reader(root)
        _right_outcome(cfg, root, *_command(root, "pkg/train.py"))
        if not isinstance(cfg, str):
            assert set(cfg.codes()) <= set(rule_codes())


@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(documents())
def test_the_console_script_says_the_same(content):
    import subprocess
    import sys

    with _project(content) as folder:
        root = Path(folder)
        cfg = _reader(root)
        r = subprocess.run([sys.executable, "-m", "torchlint", "--format", "json", "--no-cache", "pkg/train.py"],
                           cwd=root, capture_output=True, text=True, timeout=120)
        assert "Traceback" not in r.stderr
        _right_outcome(cfg, root, r.returncode, r.stdout, r.stderr)
