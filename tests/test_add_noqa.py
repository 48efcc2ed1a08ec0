"""`--add-noqa` through the real command: it writes `# noqa: TLxxx` on each line with a finding, merges with an
existing noqa list, keeps everything else byte for byte (CRLF, coding cookie, notebooks' layout), is idempotent,
and afterwards a plain run reports nothing."""

from __future__ import annotations

import json

from tests.test_notebook import SETUP, TRAIN, notebook

BUGGY = (
    "import torch\n"
    "\n"
    "running = 0.0\n"
    "for x, y in loader:\n"
    "    loss = crit(model(x), y)\n"
    "    loss.backward()  # the loss of the batch\n"
    "    optimizer.step()  # noqa: E501\n"
    "    running += loss\n"
    "    s = '''text\n"
    "that spans'''; running += loss\n"
)
ACCEPTED = (
    "import torch\n"
    "\n"
    "running = 0.0\n"
    "for x, y in loader:\n"
    "    loss = crit(model(x), y)\n"
    "    loss.backward()  # the loss of the batch\n"
    "    optimizer.step()  # noqa: E501, TL004\n"
    "    running += loss  # noqa: TL007\n"
    "    s = '''text\n"
    "that spans'''; running += loss\n"
)


def test_adds_and_merges_noqa_and_is_idempotent(tmp_path, run_cli):
    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    r = run_cli("--isolated", "--no-cache", "--add-noqa", "train.py", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr.strip() == "Added 2 noqa directives."
    assert path.read_text() == ACCEPTED
    again = run_cli("--isolated", "--no-cache", "--add-noqa", "train.py", cwd=tmp_path)
    assert again.stderr.strip() == "Added 0 noqa directives." and path.read_text() == ACCEPTED
    plain = run_cli("--isolated", "--no-cache", "-q", "--select", "TL004,TL007", "train.py", cwd=tmp_path)
    assert plain.returncode == 0 and plain.stdout == ""


def test_respects_select_and_ignore(tmp_path, run_cli):
    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    run_cli("--isolated", "--no-cache", "--add-noqa", "--ignore", "TL007", "train.py", cwd=tmp_path)
    text = path.read_text()
    assert "# noqa: E501, TL004\n" in text and "TL007" not in text
    run_cli("--isolated", "--no-cache", "--add-noqa", "--select", "TL007", "train.py", cwd=tmp_path)
    assert "    running += loss  # noqa: TL007\n" in path.read_text()


def test_crlf_and_coding_cookie_are_kept(tmp_path, run_cli):
    src = "# -*- coding: latin-1 -*-\n# caf\u00e9\n" + BUGGY.split("    s = ")[0]
    path = tmp_path / "old.py"
    path.write_bytes(src.replace("\n", "\r\n").encode("latin-1"))
    run_cli("--isolated", "--no-cache", "--add-noqa", "old.py", cwd=tmp_path)
    data = path.read_bytes()
    assert b"caf\xe9\r\n" in data and b"    running += loss  # noqa: TL007\r\n" in data
    assert data.count(b"\r\n") == src.count("\n") and b"\n" not in data.replace(b"\r\n", b"")


def test_notebook_cells_get_the_comments(tmp_path, run_cli):
    path = tmp_path / "train.ipynb"
    path.write_text(notebook([SETUP, TRAIN]), encoding="utf-8")
    before = json.loads(path.read_text(encoding="utf-8"))
    r = run_cli("--isolated", "--no-cache", "--add-noqa", "train.ipynb", cwd=tmp_path)
    assert r.stderr.strip() == "Added 1 noqa directive."
    after = json.loads(path.read_text(encoding="utf-8"))
    assert after["cells"][3]["source"][-1] == "    optimizer.step()  # noqa: TL004"
    assert [c for i, c in enumerate(after["cells"]) if i != 3] == [c for i, c in enumerate(before["cells"]) if i != 3]
    assert path.read_text(encoding="utf-8") == notebook([SETUP, TRAIN[:-1] + ["    optimizer.step()  # noqa: TL004"]])
    assert run_cli("--isolated", "--no-cache", "-q", "train.ipynb", cwd=tmp_path).stdout == ""
    run_cli("--isolated", "--no-cache", "--add-noqa", "train.ipynb", cwd=tmp_path)
    assert path.read_text(encoding="utf-8") == notebook([SETUP, TRAIN[:-1] + ["    optimizer.step()  # noqa: TL004"]])


def test_cannot_be_combined_with_fix(tmp_path, run_cli):
    (tmp_path / "t.py").write_text(BUGGY)
    r = run_cli("--isolated", "--add-noqa", "--fix", "t.py", cwd=tmp_path)
    assert r.returncode == 2 and "--add-noqa cannot be combined" in r.stderr


def test_lines_ending_inside_a_string_or_continued_are_left_alone():
    from torchlint.add_noqa import add_noqa

    text = "x = f('''a\nb''')\ny = 1 + \\\n    2\nz = 3\n"
    new, changed = add_noqa(text, {1: {"TL007"}, 3: {"TL004"}, 5: {"TL001"}})
    assert changed == 1
    assert new == "x = f('''a\nb''')\ny = 1 + \\\n    2\nz = 3  # noqa: TL001\n"


def test_a_crlf_notebook_gets_the_comments(tmp_path, run_cli):
    """A notebook checked out with git's autocrlf (CRLF between the JSON lines) got "Added 0", exit 0."""
    path = tmp_path / "train.ipynb"
    path.write_bytes(notebook([SETUP, TRAIN]).replace("\n", "\r\n").encode("utf-8"))
    r = run_cli("--isolated", "--no-cache", "--add-noqa", "train.ipynb", cwd=tmp_path)
    assert (r.returncode, r.stderr.strip()) == (0, "Added 1 noqa directive.")
    expected = notebook([SETUP, TRAIN[:-1] + ["    optimizer.step()  # noqa: TL004"]])
    assert path.read_bytes() == expected.replace("\n", "\r\n").encode("utf-8")


def test_a_notebook_that_cannot_be_written_as_it_was_is_an_error(tmp_path, run_cli):
    """A notebook laid out unlike Jupyter (indent 3) cannot be rewritten byte for byte: it was "Added 0", exit 0."""
    path = tmp_path / "odd.ipynb"
    path.write_text(notebook([SETUP, TRAIN], indent=3), encoding="utf-8")
    before = path.read_bytes()
    r = run_cli("--isolated", "--no-cache", "--add-noqa", "odd.ipynb", cwd=tmp_path)
    assert r.returncode == 2 and path.read_bytes() == before
    assert "torchlint: error: odd.ipynb: notebook not rewritten: its JSON formatting could not be reproduced" \
        in r.stderr.splitlines()


def test_a_noqa_inside_a_string_is_data_not_a_comment(tmp_path, run_cli):
    """`--add-noqa` merged its code into a `# noqa: ...` that sat inside a string literal, changing the data."""
    buggy = BUGGY.replace("    running += loss\n", "    running += loss; note = '# noqa: E501'  # the note\n")
    path = tmp_path / "train.py"
    path.write_text(buggy)
    r = run_cli("--isolated", "--no-cache", "--add-noqa", "--select", "TL007", "train.py", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr.strip() == "Added 1 noqa directive."
    assert path.read_text() == buggy.replace("  # the note\n", "  # the note  # noqa: TL007\n")
    plain = run_cli("--isolated", "--no-cache", "-q", "--select", "TL007", "train.py", cwd=tmp_path)
    assert (plain.returncode, plain.stdout) == (0, "")


def test_merges_into_the_comment_not_into_a_string_before_it():
    from torchlint.add_noqa import add_noqa

    text = "x = '# noqa: E1' + y  # noqa: E501\n"
    assert add_noqa(text, {1: {"TL007"}}) == ("x = '# noqa: E1' + y  # noqa: E501, TL007\n", 1)
    text = "x = '# noqa: TL007'\n"
    assert add_noqa(text, {1: {"TL007"}}) == ("x = '# noqa: TL007'  # noqa: TL007\n", 1)


def test_a_notebook_cell_with_magics_gets_its_comment_after_the_real_comment(tmp_path, run_cli):
    train = ["!nvidia-smi  # noqa: E1\n", *TRAIN[:-1], "    optimizer.step(); s = '# noqa: E501'  # step"]
    path = tmp_path / "train.ipynb"
    path.write_text(notebook([SETUP, train]), encoding="utf-8")
    r = run_cli("--isolated", "--no-cache", "--add-noqa", "train.ipynb", cwd=tmp_path)
    assert (r.returncode, r.stderr.strip()) == (0, "Added 1 noqa directive.")
    after = json.loads(path.read_text(encoding="utf-8"))["cells"][3]["source"]
    assert after == train[:-1] + ["    optimizer.step(); s = '# noqa: E501'  # step  # noqa: TL004"]
