"""Rule pages are generated from the rule modules; they must be current, and complete."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from torchlint.rule_docs import index, render
from torchlint.rules import ALL_RULES
from tests.conftest import ROOT

SECTIONS = ("## What it flags", "## Why it is wrong", "## Example", "## Fix", "## Correct look-alikes")


def test_pages_are_current():
    """Both copies: docs/rules/ for readers of the repository, torchlint/docs/rules/ shipped with the package."""
    for folder in (ROOT / "docs" / "rules", ROOT / "torchlint" / "docs" / "rules"):
        for rule in ALL_RULES:
            page = folder / f"{rule.code}.md"
            assert page.read_text(encoding="utf-8") == render(rule), "run: python -m torchlint.rule_docs"
        assert (folder / "README.md").read_text(encoding="utf-8") == index()


def linked_page(url: str) -> Path:
    """The file a file:// link names; fails unless it exists."""
    parsed = urlparse(url)
    assert parsed.scheme == "file", url
    page = Path(url2pathname(parsed.path))
    assert page.is_file(), url
    return page


def test_every_link_resolves_to_its_page():
    """The link of each code (the output's `= rule:`, SARIF's helpUri, JSON's url, the language server's
    codeDescription) is a page of the installed package that exists: a rule's own page, the index for TL9xx."""
    from torchlint.codes import META_RULES, doc_url
    from torchlint.rules import rule_codes

    for code in rule_codes():
        assert linked_page(doc_url(code)).read_text(encoding="utf-8").startswith(f"# {code} `")
    for code in META_RULES:
        assert f"| {code} |" in linked_page(doc_url(code)).read_text(encoding="utf-8")


def test_a_configured_docs_url_is_the_base_of_every_link():
    from torchlint.codes import doc_url

    assert doc_url("TL002", "https://docs.example.org/torchlint/rules/") == "https://docs.example.org/torchlint/rules/TL002.md"
    assert doc_url("TL904", "https://docs.example.org/rules") == "https://docs.example.org/rules/README.md"
    assert doc_url("TL002", "https://example.org/r/{code}.html") == "https://example.org/r/TL002.html"


def test_the_wheel_ships_the_rule_pages(tmp_path):
    """The pages are package data: a wheel built from this tree holds every page the links point at."""
    import importlib.util
    import shutil
    import subprocess
    import sys
    import zipfile

    from torchlint.rules import rule_codes

    # From a copy of the tracked sources: a build/ folder of an earlier build must not supply the pages.
    tree = tmp_path / "src"
    tree.mkdir()
    shutil.copy(ROOT / "pyproject.toml", tree)
    shutil.copy(ROOT / "README.md", tree)
    shutil.copytree(ROOT / "torchlint", tree / "torchlint", ignore=shutil.ignore_patterns("__pycache__"))
    # The test extra's torch needs setuptools, so it is there to build with (no index needed).
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, "-w", str(tmp_path), str(tree)],
                   check=True, capture_output=True, timeout=300)
    [wheel] = tmp_path.glob("torchlint-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"torchlint/docs/rules/{code}.md" for code in rule_codes()} | {"torchlint/docs/rules/README.md"} <= names


def test_every_page_has_every_section():
    for rule in ALL_RULES:
        text = render(rule)
        for section in SECTIONS:
            assert section in text, (rule.code, section)


def test_readme_lists_every_rule():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for rule in ALL_RULES:
        assert rule.code in readme


def test_code_table_matches_the_registry():
    """The codes read from the rule modules' file names, without importing them, are the imported rules' codes."""
    from torchlint.rules import rule_codes

    assert list(rule_codes()) == [rule.code for rule in ALL_RULES]
    assert len(rule_codes()) == 11


def test_warm_path_does_not_import_libcst():
    """Reading results from the cache must not pay for libcst and the rules."""
    import subprocess
    import sys

    # the registry's package is imported (it knows the codes from its file names), no rule module is
    code = "import sys, torchlint.cli; print('libcst' in sys.modules, 'torchlint.rules.base' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_a_warm_run_does_not_import_libcst(tmp_path):
    """A run whose every answer is cached reads the cache and prints: no parser, no analysis, no rules (importing
    them would cost a warm run several times what its work does)."""
    import subprocess
    import sys

    (tmp_path / "engine.py").write_text("def step(model, x, opt):\n    model(x).backward()\n    opt.step()\n")
    (tmp_path / "train.py").write_text("from engine import step\nfor x in data:\n    step(model, x, opt)\n")
    env = {"XDG_CACHE_HOME": str(tmp_path / "home"), "PATH": ""}
    code = ("import sys\nfrom torchlint.cli import main\ntry:\n    main(['--exit-zero', '-q', *sys.argv[1:], '.'])\n"
            "except SystemExit:\n    pass\nprint(sorted({m.split('.')[0] for m in sys.modules} & {'libcst'}),"
            " 'torchlint.rules.base' in sys.modules)")

    def run(*args: str) -> str:
        out = subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, env=env, capture_output=True,
                             text=True)
        return out.stdout.splitlines()[-1] if out.stdout else out.stderr

    in_process = ("--jobs", "1", "--file-timeout", "0")
    assert run(*in_process) == "['libcst'] True"  # cold, checked in this process: the probe sees the imports
    assert run(*in_process) == "[] False"  # warm, in this process
    assert run() == "[] False"  # warm, with a time limit (checks would go to worker processes; none is needed)
