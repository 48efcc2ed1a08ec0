"""The layout keeps the architecture: the import-linter contracts of pyproject.toml (the package's layers and the
semantic core's) hold, no two modules import each other, no module is too long, and no private name is imported
from another module."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "torchlint"


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    return subprocess.run([exe, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(cwd), "PATH": str(Path(sys.executable).parent)})


def test_layer_contracts_are_kept():
    out = _lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 kept, 0 broken" in out.stdout, out.stdout


@pytest.mark.parametrize("low, high", [
    ("torchlint/analysis/semantics.py", "torchlint.analysis.model"),  # a fact asking the file model
    ("torchlint/analysis/scopes.py", "torchlint.analysis.kinds"),  # a query layer asking the one above
    ("torchlint/rules/base.py", "torchlint.engine"),  # a rule importing the engine
])
def test_an_upward_import_breaks_a_contract(tmp_path, low, high):
    shutil.copytree(PACKAGE, tmp_path / "torchlint", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / low
    target.write_text(target.read_text() + f"\nimport {high}  # noqa: E402\n")
    out = _lint_imports(tmp_path)
    assert out.returncode != 0 and "BROKEN" in out.stdout.upper(), out.stdout


def _graph():
    grimp = pytest.importorskip("grimp")
    return grimp.build_graph("torchlint")


def test_no_module_imports_one_that_imports_it():
    graph = _graph()
    circles = sorted(
        {tuple(sorted((a, b))) for a in graph.modules for b in graph.find_modules_directly_imported_by(a)
         if a != b and graph.chain_exists(importer=b, imported=a)}
    )
    assert not circles, circles


def test_modules_stay_short():
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        limit = 500 if "analysis" in path.relative_to(PACKAGE).parts else 600
        lines = len(path.read_text().splitlines())
        if lines > limit:
            too_long.append(f"{path.relative_to(ROOT)}: {lines} lines (limit {limit})")
    assert not too_long, too_long


def test_no_private_name_is_imported_from_another_module():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torchlint"):
                found += [f"{path.relative_to(ROOT)}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert not found, found
