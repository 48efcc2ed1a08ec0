"""The callers index (`torchlint.project_callers`): a helper file with no backward of its own is checked with what
the project's other files do with its functions and methods."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from tests.conftest import ROOT
from torchlint.project import Project
from torchlint.project_callers import callers_text, candidates

PROJECTS = ROOT / "tests" / "projects"

CALLERS = [
    # the caller's side of `item_loss(out.detach(), goal)`: a criterion given only the cut output, its term added
    # into the back-propagated total, gives no gradient at all (the loss function's own `.data` is not the cut)
    "fit.py:29:25: TL003 `out.detach()` is the only input with a graph of `item_loss`",
    # a loss function cutting its prediction (`pred.data`), given a model's output by a caller that
    # back-propagates what it returns
    "losses.py:6:24: TL003 `pred.data` cuts `pred` out of the graph (.data) in `box_loss()`, yet fit.py:28",
    # a meter's method adding each item of the dict it is given into `self`, called per iteration with the dict
    # whose "total" the loop back-propagates, on an object bound before the loop
    "meters.py:8:13: TL007 `add()` keeps `losses` in `self`, and fit.py:36",
    # silent: `.data` on a target (the caller passes what a function made), a result only logged, a caller under
    # no_grad, a helper no file calls, a caller passing `out.detach()` (to the loss function), an item of a returned pair only logged, a
    # teacher's output cut beside the student's (a target on purpose), a feature cut for a probe the loss runs;
    # a method called under no_grad, on an object the loop builds afresh, or given `.item()`; given `float(loss)`
    # and an optimizer's learning rate, in a loop whose backward is the optimizer's own (`amp_opt.backward(loss)`)
]


def _lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if ": TL" in line]


def test_helpers_are_checked_with_what_their_callers_do(tmp_path, run_cli):
    project = tmp_path / "callers"
    shutil.copytree(PROJECTS / "callers", project)
    found = _lines(run_cli("-q", "--no-cache", ".", cwd=project).stdout)
    assert len(found) == len(CALLERS) and all(f.startswith(e) for f, e in zip(found, CALLERS)), "\n".join(found)
    alone = _lines(run_cli("-q", "--no-cache", "--no-project", ".", cwd=project).stdout)
    # without the project only the caller's own finding stays (its file shows all it needs)
    assert len(alone) == 1 and alone[0].startswith(CALLERS[0]), "\n".join(alone)


def test_candidates_are_read_only_in_files_without_a_backward():
    loss = "def my_loss(pred, y):\n    return ((pred.data - y) ** 2).mean()\n"
    assert candidates(loss, ast.parse(loss)) == ["my_loss"]
    trained = loss + "\ndef fit(x):\n    my_loss(x, x).backward()\n"
    assert candidates(trained, ast.parse(trained)) == []
    rebound = "class M:\n    def add(self, v):\n        v = float(v)\n        self.t += v\n"
    assert candidates(rebound, ast.parse(rebound)) == []  # converted first
    counter = "class M:\n    def tick(self, v):\n        self.n += 1\n"
    assert candidates(counter, ast.parse(counter)) == []
    plain = "class M:\n    def add(self, v):\n        self.total += v\n"
    assert candidates(plain, ast.parse(plain)) == []  # not named like a loss: left to the callers' own check
    named = "class M:\n    def add(self, loss):\n        self.total += loss\n"
    assert candidates(named, ast.parse(named)) == ["M.add"]


def test_no_caller_is_read_for_a_file_without_a_candidate(tmp_path):
    (tmp_path / "a.py").write_text("def f(x):\n    return x.data\n")
    (tmp_path / "b.py").write_text("from a import f\nf(1).backward()\n")
    project = Project(tmp_path)
    assert callers_text(project.callers_index, tmp_path / "a.py", (tmp_path / "a.py").read_text()) == ""
    assert project._texts == {}  # not even the caller's text was read


def test_a_change_to_a_caller_reanalyses_the_helper(tmp_path):
    """The caller files read for a helper are recorded with its cached result: a caller that stops passing its
    losses makes the helper's finding go."""
    from torchlint.batch import Job, run
    from torchlint.rules import ALL_RULES

    project = tmp_path / "callers"
    shutil.copytree(PROJECTS / "callers", project)
    codes = tuple(r.code for r in ALL_RULES)
    files = sorted(str(p) for p in project.rglob("*.py"))

    def check():
        jobs = [Job(f, codes, project=str(project)) for f in files]
        return {Path(o.path).relative_to(project).as_posix(): o for o in run(jobs, 1, project)}

    assert [d.code for d in check()["meters.py"].diags] == ["TL007"]
    assert check()["meters.py"].cached
    fit = project / "fit.py"
    fit.write_text(fit.read_text().replace("        tracker.add(losses)\n", ""))
    third = check()
    assert not third["meters.py"].cached and third["meters.py"].diags == ()
    assert not third["losses.py"].cached  # it read fit.py too (its finding stays)
    assert [d.code for d in third["losses.py"].diags] == ["TL003"]


def test_callers_are_not_searched_in_folders_the_file_walk_skips(tmp_path):
    """A copy of the project under `build/` or in a `*.egg-info` folder is skipped by the file walk's default
    excludes; the callers' search skips the same folders."""
    from torchlint.excluded import DEFAULT_EXCLUDE, excluded_by_default
    from torchlint.config import Config

    assert Config().exclude == DEFAULT_EXCLUDE
    assert excluded_by_default("build") and excluded_by_default("pkg.egg-info") and excluded_by_default(".venv")
    assert not excluded_by_default("models")
    meter = "class Meter:\n    def add(self, loss):\n        self.total += loss\n"
    caller = ("from meters import Meter\nm = Meter()\nfor x in xs:\n    losses = net(x)\n    m.add(losses)\n"
              "    losses['total'].backward()\n")
    (tmp_path / "meters.py").write_text(meter)
    for folder in ("build", "dist", "pkg.egg-info"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "fit.py").write_text(caller)
    project = Project(tmp_path)
    assert callers_text(project.callers_index, tmp_path / "meters.py", meter) == ""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "fit.py").write_text(caller)
    assert callers_text(Project(tmp_path).callers_index, tmp_path / "meters.py", meter) == "for .backward("


STORED = [
    # `Base.evaluate` stores the loss it returns into `stats`; online.py's loop back-propagates what it returns and
    # hands `self.stats`, which its base class (trainer.py) binds to a `Collector` whose `__setitem__` appends
    "workers/base.py:4:9: TL007 `stats[\"loss\"] = loss` stores into `stats`, which workers/online.py:9 hands in as "
    "a `Collector` bound outside its loop",
    # silent: `score`, handed a `Latest` whose `__setitem__` overwrites; `measure`, handed a collector the loop
    # builds afresh; `note`, handed a `Collector` by one loop and an unknown object by another; `shown`, whose caller
    # back-propagates nothing of what it returns
]


def test_a_parameter_is_known_by_the_objects_its_callers_hand_in(tmp_path, run_cli):
    project = tmp_path / "stored"
    shutil.copytree(PROJECTS / "stored", project)
    found = _lines(run_cli("-q", "--no-cache", ".", cwd=project).stdout)
    assert len(found) == len(STORED) and all(f.startswith(e) for f, e in zip(found, STORED)), "\n".join(found)
    alone = _lines(run_cli("-q", "--no-cache", "--no-project", ".", cwd=project).stdout)
    assert alone == [], "\n".join(alone)


def test_a_loss_stored_into_a_parameters_item_is_a_candidate():
    stored = "class W:\n    def run(self, m, x, stats):\n        loss = m(x)\n        stats['loss'] = loss\n" \
             "        return loss\n"
    assert candidates(stored, ast.parse(stored)) == ["W.run"]
    kept = "def run(stats, loss):\n    stats['loss'] = loss\n"
    assert candidates(kept, ast.parse(kept)) == ["run"]
    local = "def run(m, x):\n    stats = {}\n    loss = m(x)\n    stats['loss'] = loss\n    return loss\n"
    assert candidates(local, ast.parse(local)) == []  # a dict of its own
    unnamed = "def run(m, x, stats):\n    out = m(x)\n    stats['out'] = out\n    return out\n"
    assert candidates(unnamed, ast.parse(unnamed)) == []  # not named like a loss
    kept_not_returned = "def run(m, x, stats):\n    loss = m(x)\n    stats['loss'] = loss\n    return 0\n"
    assert candidates(kept_not_returned, ast.parse(kept_not_returned)) == []


RETURNED_TERM = {
    "losses.py": (
        "import torch.nn.functional as F\n\n\n"
        "def total_loss(pred, target):\n"
        "    l1 = F.l1_loss(pred, target)\n"
        "    l2 = F.mse_loss(pred, target)\n"
        "    return l1 + 0.5 * l2.item()\n\n\n"
        "def weighted_loss(pred, target, w):\n"
        "    ce = F.cross_entropy(pred, target)\n"
        "    return ce * w.detach()\n"
    ),
    "train.py": (
        "import torch\n"
        "from losses import total_loss, weighted_loss\n\n\n"
        "def train(model, loader, opt):\n"
        "    for x, y, w in loader:\n"
        "        opt.zero_grad()\n"
        "        out = model(x)\n"
        "        loss = total_loss(out, y) + weighted_loss(out, y, w)\n"
        "        loss.backward()\n"
        "        opt.step()\n"
    ),
}


def test_a_criterion_value_cut_in_a_returned_sum_is_reported_for_callers_that_back_propagate_it(tmp_path, run_cli):
    """`return l1 + 0.5 * l2.item()` in a file of losses, whose caller passes a model's output (a parameter named as
    a module is one: `def train(model, ...)`) and back-propagates the sum: the `l2` term trains nothing. A detached
    weight (`ce * w.detach()`) is not a term."""
    for name, text in RETURNED_TERM.items():
        (tmp_path / name).write_text(text)
    found = _lines(run_cli("-q", "--no-cache", ".", cwd=tmp_path).stdout)
    assert [f.split(" `")[0] for f in found] == ["losses.py:7:23: TL003"], "\n".join(found)
    assert "`l2.item()` cuts `l2` (computed from `pred`)" in found[0] and "train.py:9" in found[0]
    (tmp_path / "train.py").write_text(RETURNED_TERM["train.py"].replace("loss.backward()", "print(loss.item())"))
    assert _lines(run_cli("-q", "--no-cache", ".", cwd=tmp_path).stdout) == []  # only logged: nothing to train
