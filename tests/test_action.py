"""The GitHub Action (action.yml), run step by step as the runner runs a composite action: the inputs' values
substituted into the steps' `env`, `GITHUB_ACTION_PATH` set to this checkout, each `run` script under
`bash -e -o pipefail`, with a fresh virtualenv as the workflow's Python and a folder as the runner's temp
(the install step really installs torchlint from the checkout). Checked on small repositories: the annotations,
the exit code, and that nothing of the repository checked runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())


def run_action(repo: Path, bindir: Path, inputs: dict[str, str], temp: Path) -> tuple[int, str]:
    values = {name: spec.get("default", "") for name, spec in ACTION["inputs"].items()} | inputs
    assert ACTION["runs"]["using"] == "composite"
    output = ""
    for step in ACTION["runs"]["steps"]:
        env = dict(os.environ, GITHUB_ACTION_PATH=str(ROOT), RUNNER_TEMP=str(temp),
                   PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
        env.pop("VIRTUAL_ENV", None)
        for key, value in (step.get("env") or {}).items():
            env[key] = re.sub(r"\$\{\{\s*inputs\.(\w+)\s*\}\}", lambda m: values[m.group(1)], str(value))
        assert step["shell"] == "bash"
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=repo,
                              env=env, capture_output=True, text=True, timeout=600)
        output += done.stdout
        if done.returncode != 0:
            return done.returncode, output + done.stderr
    return 0, output


@pytest.fixture(scope="module")
def bindir(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("action-venv")
    venv.EnvBuilder(with_pip=False).create(home)  # the action installs into an environment of its own
    return home / ("Scripts" if sys.platform == "win32" else "bin")


@pytest.fixture(scope="module")
def temp(tmp_path_factory) -> Path:
    """RUNNER_TEMP: one job that runs the action several times."""
    return tmp_path_factory.mktemp("runner-temp")


TRAIN = "for x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n    optimizer.step()\n"


def test_action_annotates_findings_and_fails(tmp_path, bindir, temp):
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "train.py").write_text(TRAIN)
    (repo / "src" / "ok.py").write_text("print('fine')\n")
    code, out = run_action(repo, bindir, {"args": "src"}, temp)
    assert code == 1, out
    annotations = [line for line in out.splitlines() if line.startswith("::")]
    assert len(annotations) == 1
    assert annotations[0].startswith("::error file=src/train.py,line=4,col=5,endLine=4,endColumn=21,"
                                     "title=torchlint TL004::TL004 `optimizer.step()` runs in a loop")
    assert (temp / "torchlint-action" / "venv" / bindir.name / "torchlint").exists()  # in an environment of its own
    assert not (bindir / "torchlint").exists()  # the workflow's Python is left as it was


def test_action_passes_on_a_clean_repository(tmp_path, bindir, temp):
    repo = tmp_path / "clean"
    repo.mkdir()
    (repo / "train.py").write_text(
        "for x, y in loader:\n    optimizer.zero_grad()\n    crit(model(x), y).backward()\n    optimizer.step()\n")
    code, out = run_action(repo, bindir, {}, temp)
    assert code == 0, out
    assert "::error" not in out


# What `python -m pip`, `python -m venv` or `python -m torchlint` in the workspace would import from it first.
PLANTED = ("pip.py", "venv.py", "ensurepip.py", "torchlint.py", "pathspec.py", "libcst.py")


def test_no_module_of_the_repository_runs(tmp_path, bindir, temp):
    repo = tmp_path / "hostile"
    repo.mkdir()
    (repo / "train.py").write_text(TRAIN)
    for name in PLANTED:
        (repo / name).write_text("import pathlib\n"
                                 "pathlib.Path(__file__).with_name('RAN').open('a').write(pathlib.Path(__file__).name)\n")
    code, out = run_action(repo, bindir, {}, temp)
    assert not (repo / "RAN").exists(), f"ran: {(repo / 'RAN').read_text()}"
    assert code == 1, out
    assert [line[:35] for line in out.splitlines() if line.startswith("::")] == ["::error file=train.py,line=4,col=5,"]
