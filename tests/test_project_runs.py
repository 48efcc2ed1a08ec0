"""The project's runs of a file's training-step methods (`torchlint.project_runs`): a method that back-propagates
and steps, run once per iteration by a loop of another project file, is checked as that loop's iteration."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import ROOT
from torchlint.project import Project

PROJECTS = ROOT / "tests" / "projects"

RUNS = [
    # `Duo.step` steps the critic's optimizer with no clearing of it (the painter's `zero_grad()` clears the
    # painter only: each optimizer is built over its holder's own parameters); a script three folders below the
    # root imports `Duo` through the package's `__init__`, binds `duo = Duo()` and calls `duo.step(batch)` per batch
    "pkg/models/pair.py:25:9: TL004 `real.backward()` adds into the gradients `self.critic.optimizer.step()` "
    "applies, and nothing clears `self.critic.optimizer`'s gradients in `Duo.step()`, which "
    "scripts/deep/train/run.py:10 runs",
    # `Weighted._weighted` keeps its graph (`retain_graph=True` on its last backward) and returns the loss in a dict;
    # `Weighted.__call__`, which nothing in its file calls, reaches it, and fit.py calls `weigh(...)` per batch
    "pkg/sched.py:26:9: TL002 `total.backward(retain_graph=True)` is the last backward of `Weighted._weighted()`, "
    "which scripts/deep/train/fit.py:9 runs once per iteration of a loop",
    # silent (TL002): `Logged.update`, which returns `loss.item()` (the graph dies with the call); `Shared.update`,
    # whose returned loss the caller's loop back-propagates again (the kept graph is needed there)
    # silent (TL004): `Solo.step`, whose caller's loop clears before each call; `Lone.step`, whose caller's `lone` is an
    # instance of another module's class of the same name (and `env.step(batch)` of an unknown object);
    # `Watched.step`, whose caller's loop calls the class's `reset()`, which clears; `Duo().step(batch)` under
    # no_grad
]


def _lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if ": TL" in line]


def test_a_training_step_method_is_checked_as_its_callers_iteration(tmp_path, run_cli):
    project = tmp_path / "runs"
    shutil.copytree(PROJECTS / "runs", project)
    found = _lines(run_cli("-q", "--no-cache", ".", cwd=project).stdout)
    assert len(found) == len(RUNS) and all(f.startswith(e) for f, e in zip(found, RUNS)), "\n".join(found)
    alone = _lines(run_cli("-q", "--no-cache", "--no-project", ".", cwd=project).stdout)
    assert alone == [], "\n".join(alone)


def test_runs_need_an_instance_of_the_class_imported_from_its_file(tmp_path):
    (tmp_path / "a.py").write_text("class Agent:\n    def step(self, x):\n        return x\n")
    (tmp_path / "b.py").write_text("class Agent:\n    def step(self, x):\n        return x\n")
    (tmp_path / "run.py").write_text(
        "from b import Agent\nfrom a import Agent as Mine\n"
        "agent, mine, both = Agent(), Mine(), Mine()\nboth = Agent()\n"
        "for x in xs:\n    agent.step(x)\n    both.step(x)\n    mine.step(x)\n")
    index = Project(tmp_path).callers_index.runs
    read: list[Path] = []
    uses = index.runs(tmp_path / "a.py", "Agent.step", read.append)
    assert [(u.path, u.line, u.clears) for u in uses] == [("run.py", 8, False)]
    assert read == [tmp_path / "run.py"]


def test_runs_are_not_searched_for_a_method_no_rule_asks_about(tmp_path):
    """A file whose step body clears its optimizer reads no other file of the project."""
    from torchlint.engine import lint_source

    text = ("import torch\n\nclass Agent:\n    def step(self, x):\n        self.opt.zero_grad()\n"
            "        self.net(x).mean().backward()\n        self.opt.step()\n")
    (tmp_path / "agent.py").write_text(text)
    (tmp_path / "run.py").write_text("from agent import Agent\na = Agent()\nfor x in xs:\n    a.step(x)\n")
    project = Project(tmp_path)
    lint_source(text, str(tmp_path / "agent.py"), project=project)
    assert tmp_path / "run.py" not in project._texts


def test_runs_are_searched_where_the_file_walk_goes(tmp_path):
    """Breadth first from the root, skipping the folders the file walk skips by default (`build/`, `.venv/`)."""
    (tmp_path / "agent.py").write_text("class Agent:\n    def step(self, x):\n        return x\n")
    caller = "from agent import Agent\na = Agent()\nfor x in xs:\n    a.step(x)\n"
    for folder in ("build", ".venv", "deep/er/still"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "run.py").write_text(caller)
    uses = Project(tmp_path).callers_index.runs.runs(tmp_path / "agent.py", "Agent.step", lambda p: None)
    assert [u.path for u in uses] == ["deep/er/still/run.py"]
