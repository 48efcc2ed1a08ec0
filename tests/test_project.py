"""Project analysis: calls into the other files of a project, checked through the CLI, flake8, the language
server and pre-commit, with the cache invalidated by the files a result read (torchlint.project)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from torchlint.analysis.prescan import Imported, acting, inert, scan_imports
from torchlint.project import Project

PROJECTS = ROOT / "tests" / "projects"

ENGINE_SPLIT = [
    # a per-batch helper imported by name from engine.py: backward and step, no zero_grad anywhere
    "main.py:14:5: TL004 [unsafe fix] `train_step(model, batch, optimizer, criterion)` steps `optimizer` "
    "(engine.py:8) in a loop that never clears `optimizer`'s gradients",
    # the same through `import utils; utils.fit_batch(...)`, the optimizer passed under another name
    "main.py:17:5: TL004 [unsafe fix] `utils.fit_batch(model, x, y, optimizer, criterion)` steps `optimizer` "
    "(utils.py:4) in a loop that never clears `optimizer`'s gradients",
    # a training function of engine.py steps the optimizer after the scheduler stepped first
    "main.py:30:5: TL011 [unsafe fix] `scheduler.step()` runs before `engine.train_one_epoch(model, loader, "
    "optimizer, criterion)` (engine.py:20), which steps `optimizer`, in the same iteration",
    # a relative import inside a package
    "pkg/loop.py:6:9: TL004 [unsafe fix] `sgd_step(net, inputs, targets, optimizer, loss_fn)` steps `optimizer` "
    "(pkg/steps.py:4) in a loop that never clears `optimizer`'s gradients",
    "resume.py:11:5: TL011 [unsafe fix] `sched.step()` runs before `train_one_epoch(model, data, opt, "
    "torch.nn.functional.mse_loss)` (engine.py:20), which steps `opt`, in the same iteration",
    # `import engine as eng`, a while loop
    "warmup.py:12:5: TL011 [unsafe fix] `warmup.step()` runs before `eng.train_one_epoch(net, batches, adam, "
    "torch.nn.functional.l1_loss)` (engine.py:20), which steps `adam`, in the same iteration",
]
TRAINER_BASE = [
    # `self.train_step` inherited from a base class in another file
    "run.py:8:17: TL004 [unsafe fix] `self.train_step(batch)` steps `self.optimizer` (trainers/base.py:16) in a "
    "loop that never clears `self.optimizer`'s gradients",
    # through a base class whose own base (same file) defines it
    "run.py:23:13: TL004 [unsafe fix] `self.train_step(batch)` steps `self.optimizer` (trainers/base.py:16) in "
    "a loop that never clears `self.optimizer`'s gradients",
]


NESTED_RUN = [
    # `epochs.train` reaches its batch loop through `_run_batches` of its own file: it is a run that steps `adam`
    "main.py:11:5: TL011 [unsafe fix] `sched.step()` runs before `epochs.train(model=model, loader=loader, "
    "optimizer=adam)` (epochs.py:10), which steps `adam`",
    # (ordered.py steps the scheduler after the same run: silent)
]


OBJECT_CALLS = [
    # `self.engine = Trainer(...)` in __init__, then `self.engine.train_step(x, y)`: the class of another file
    "holder.py:12:13: TL004 [unsafe fix] `self.engine.train_step(x, y)` steps `self.engine.optimizer` "
    "(trainer.py:9) in a loop that never clears `self.engine.optimizer`'s gradients",
    # `trainer = Trainer(...)` at module level (clean.py's CleanTrainer clears first: silent)
    "main.py:8:5: TL004 [unsafe fix] `trainer.train_step(x, y)` steps `trainer.optimizer` (trainer.py:9) in a "
    "loop that never clears `trainer.optimizer`'s gradients",
]


def _copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(PROJECTS / name, dest)
    return dest


def _lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if ": TL" in line]


def _matches(found: list[str], expected: list[str]) -> bool:
    return len(found) == len(expected) and all(f.startswith(e) for f, e in zip(found, expected))


INERT_HELPERS = [
    # `gradtools.clamp_grads(sgd, 1.0)` and `gradtools.grad_norm(sgd)`: functions of the project that touch no
    # gradient's value beyond clamping it, so the optimizer handed to them is not cleared (cleared.py: a helper
    # that zeroes `p.grad.data`, one that fills through a helper of its file, one that hands it to a library)
    "main.py:12:9: TL004 [unsafe fix] `sgd.step()` runs in a loop that never clears `sgd`'s gradients",
]


@pytest.mark.parametrize("name, expected", [("engine_split", ENGINE_SPLIT), ("trainer_base", TRAINER_BASE),
                                            ("nested_run", NESTED_RUN), ("object_calls", OBJECT_CALLS),
                                            ("inert_helpers", INERT_HELPERS)])
def test_cli_follows_calls_into_other_files(tmp_path, run_cli, name, expected):
    project = _copy(name, tmp_path)
    r = run_cli("-q", "--no-cache", ".", cwd=project)
    found = _lines(r.stdout)
    assert _matches(found, expected), "\n".join(found)
    assert r.returncode == 1


@pytest.mark.parametrize("name", ["engine_split", "trainer_base", "nested_run", "object_calls", "inert_helpers"])
def test_each_file_alone_finds_none_of_them(tmp_path, run_cli, name):
    """The negative half: without the other files, every call above is unknown and torchlint stays silent
    (the negatives in the projects: a helper that zeroes, a zero_grad before the call, a scheduler after the
    training call, a helper that hands the optimizer to a call its file cannot follow)."""
    project = _copy(name, tmp_path)
    r = run_cli("-q", "--no-cache", "--no-project", ".", cwd=project)
    assert _lines(r.stdout) == [] and r.returncode == 0, r.stdout


def test_results_do_not_depend_on_order_or_on_what_is_listed(tmp_path, run_cli):
    project = _copy("engine_split", tmp_path)
    files = sorted(str(p.relative_to(project)) for p in project.rglob("*.py"))
    forward = run_cli("-q", "--no-cache", "--jobs", "1", *files, cwd=project)
    backward = run_cli("-q", "--no-cache", "--jobs", "2", *reversed(files), cwd=project)
    assert forward.stdout == backward.stdout
    alone = run_cli("-q", "--no-cache", "main.py", cwd=project)  # what pre-commit does: only the changed file
    assert _lines(alone.stdout) == [line for line in _lines(forward.stdout) if line.startswith("main.py")]


def test_cache_reanalyses_only_what_read_the_changed_file(tmp_path):
    from torchlint.batch import Job, run
    from torchlint.rules import ALL_RULES

    project = _copy("engine_split", tmp_path)
    codes = tuple(r.code for r in ALL_RULES)
    files = sorted(str(p) for p in project.rglob("*.py"))

    def check():
        jobs = [Job(f, codes, project=str(project)) for f in files]
        return {Path(o.path).relative_to(project).as_posix(): o for o in run(jobs, 1, project)}

    first = check()
    assert not any(o.cached for o in first.values())
    second = check()
    assert all(o.cached for o in second.values())
    assert [d.code for d in second["main.py"].diags] == ["TL004", "TL004", "TL011"]

    engine = project / "engine.py"
    engine.write_text(engine.read_text().replace(
        "    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n    return loss.item()",
        "    optimizer.zero_grad()\n    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"
        "    return loss.item()",
    ))
    third = check()
    again = sorted(name for name, o in third.items() if not o.cached)
    # engine.py itself, and the two files that import it; pkg/ and utils.py are answered from the cache
    assert again == ["engine.py", "main.py", "resume.py", "warmup.py"]
    assert [(d.line, d.code) for d in third["main.py"].diags] == [(17, "TL004"), (30, "TL011")]


def test_flake8_and_the_language_server_use_the_cached_project(tmp_path, run_cli):
    project = _copy("engine_split", tmp_path)
    (project / "pyproject.toml").write_text("[tool.torchlint]\n")

    def flake8():
        r = subprocess.run([sys.executable, "-m", "flake8", "--select", "TL", "main.py"], cwd=project,
                           capture_output=True, text=True, timeout=120)
        return [line.split(" ", 2)[:2] for line in r.stdout.splitlines()]

    assert flake8() == []  # nothing cached yet: the file is checked alone
    run_cli("-q", ".", cwd=project)  # the command caches the exports of engine.py and utils.py
    assert flake8() == [["main.py:14:5:", "TL004"], ["main.py:17:5:", "TL004"], ["main.py:30:5:", "TL011"]]

    from torchlint.lsp_jobs import Document, check  # what the language server's workers run

    path = project / "main.py"
    found = check(Document(str(path), str(path), path.read_text())).diagnostics
    assert [(d.line, d.code) for d in found] == [(14, "TL004"), (17, "TL004"), (30, "TL011")]
    assert "(engine.py:8)" in found[0].message


def test_notebook_calls_into_the_project(tmp_path, run_cli):
    project = _copy("engine_split", tmp_path)
    cells = ["import torch\nfrom engine import train_step\n",
             "for batch in loader:\n    train_step(model, batch, optimizer, criterion)\n"]
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                     "source": c.splitlines(keepends=True)} for c in cells],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (project / "explore.ipynb").write_text(json.dumps(nb))
    r = run_cli("-q", "--no-cache", "explore.ipynb", cwd=project)
    assert _lines(r.stdout)[0].startswith("explore.ipynb:cell 2:2:5: TL004"), r.stdout


# -- the parts ---------------------------------------------------------------------------------------------------
def test_scan_imports_reads_every_form():
    bound = scan_imports(
        "import a.b, c as d\nfrom . import x\n# important\nfrom ..pkg.m import (f,\n   g as h)\n"
        "  import torch.nn\nimport torch.optim\nfrom m import *\n"
    )
    assert bound == {
        "a": Imported("a", 0, None, ("b",)), "d": Imported("c", 0), "x": Imported("", 1, "x"),
        "f": Imported("pkg.m", 2, "f"), "h": Imported("pkg.m", 2, "g"),
        "torch": Imported("torch", 0, None, ("nn", "optim")),
    }


def test_a_name_imported_from_two_places_is_not_resolved():
    """A stand-in class for old versions of torch, imported on the other branch of a version test: which of the
    two the run binds is not known, so neither is followed. The same import twice is one binding."""
    text = ("if torch.__version__ >= '1.6.0':\n    from torch.cuda.amp import GradScaler\nelse:\n"
            "    from ..amp_dummy import GradScaler\nfrom utils import meter\nfrom utils import meter\n")
    assert scan_imports(text) == {"meter": Imported("utils", 0, "meter")}


def test_a_stand_in_scaler_of_the_project_does_not_make_the_scalers_step_a_plain_one(tmp_path, run_cli):
    """With the stand-in's `step()` (it calls `optimizer.step()`) taken for the scaler's, the loop's
    `scaler.step(opt)` would read as a plain step of scaled gradients."""
    (tmp_path / "amp_dummy.py").write_text(
        "class GradScaler:\n    def scale(self, x):\n        return x\n\n"
        "    def step(self, optimizer):\n        return optimizer.step()\n\n    def update(self):\n        pass\n")
    (tmp_path / "train.py").write_text(
        "import torch\nif torch.__version__ >= '1.6.0':\n    from torch.cuda.amp import GradScaler\nelse:\n"
        "    from amp_dummy import GradScaler\n\n\ndef train(model, loader, opt, crit):\n    scaler = GradScaler()\n"
        "    for x, y in loader:\n        opt.zero_grad()\n        scaler.scale(crit(model(x), y)).backward()\n"
        "        scaler.step(opt)\n        scaler.update()\n")
    result = run_cli("check", "--isolated", "--no-cache", ".", cwd=tmp_path)
    assert "TL010" not in result.stdout, result.stdout


def test_a_clamping_gradient_hook_registered_by_another_file_under_a_grad_scaler(tmp_path, run_cli):
    """A helper of another file registers hooks that clamp each parameter's gradient; the trainer steps through a
    GradScaler, its scaled backward left to a callback of a third file: the hooks clamp scaled gradients."""
    (tmp_path / "util.py").write_text(
        "def enable_clipping(model, c):\n    if c is not None:\n        for p in model.parameters():\n"
        "            p.register_hook(lambda g: g.clamp(-c, c))\n\n\ndef log_sizes(model):\n"
        "    return [p.numel() for p in model.parameters()]\n")
    (tmp_path / "trainer.py").write_text(
        "import util\nfrom callbacks import scaled_backward\nfrom torch.cuda.amp import GradScaler\n\n\n"
        "class Trainer:\n    def __init__(self, fp16):\n        self.scaler = GradScaler() if fp16 else None\n\n"
        "    def train(self, loader):\n"
        "        util.enable_clipping(self.model, self.clip)\n        util.log_sizes(self.model)\n"
        "        for x, y in loader:\n            self.opt.zero_grad()\n            loss = self.crit(self.model(x), y)\n"
        "            if self.scaler is not None:\n                scaled_backward(self, loss)\n"
        "                self.scaler.step(self.opt)\n                self.scaler.update()\n            else:\n"
        "                loss.backward()\n                self.opt.step()\n")
    (tmp_path / "callbacks.py").write_text(
        "def scaled_backward(trainer, loss):\n    trainer.scaler.scale(loss).backward()\n")
    result = run_cli("check", "--isolated", "--no-cache", "--select", "TL010", ".", cwd=tmp_path)
    lines = [line for line in result.stdout.splitlines() if "TL010" in line]
    assert len(lines) == 1 and lines[0].startswith("trainer.py:11:9: TL010 `util.enable_clipping(self.model, self.clip)`"), \
        result.stdout


def test_an_update_under_the_scalers_own_test_in_another_files_helper(tmp_path, run_cli):
    """The helper updates the scaler under `if scaler:`: handed one, it updates as the caller would, so the next
    iteration's `unscale_` follows an update on both paths. Under another test of its own it is not followed."""
    helper = ("def step_and_log(scaler, opt, log):\n    if {test}:\n        scaler.step(opt)\n        scaler.update()\n"
              "    else:\n        opt.step()\n    log.append(1)\n")
    (tmp_path / "train.py").write_text(
        "import torch\nimport debug\n\n\ndef train(model, loader, opt, crit, log_every):\n"
        "    scaler = torch.cuda.amp.GradScaler()\n    for i, (x, y) in enumerate(loader):\n"
        "        scaler.scale(crit(model(x), y)).backward()\n        scaler.unscale_(opt)\n"
        "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n        if i % log_every == 0:\n"
        "            debug.step_and_log(scaler, opt, [])\n        else:\n            scaler.step(opt)\n"
        "            scaler.update()\n        opt.zero_grad()\n")
    (tmp_path / "debug.py").write_text(helper.format(test="scaler"))
    result = run_cli("check", "--isolated", "--no-cache", "--select", "TL010", ".", cwd=tmp_path)
    assert "TL010" not in result.stdout, result.stdout
    (tmp_path / "debug.py").write_text(helper.format(test="len(log) > 3"))
    result = run_cli("check", "--isolated", "--no-cache", "--select", "TL010", ".", cwd=tmp_path)
    assert "train.py:9:9: TL010" in result.stdout, result.stdout


def test_module_resolution(tmp_path):
    for rel in ["app/train.py", "app/helpers.py", "src/lib/__init__.py", "src/lib/core.py", "pkg/__init__.py",
                "pkg/a/__init__.py", "pkg/a/mod.py", "pkg/b.py"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    p = Project(tmp_path)
    train, mod = (tmp_path / "app/train.py").resolve(), (tmp_path / "pkg/a/mod.py").resolve()
    root = tmp_path.resolve()
    assert p.module_file(train, Imported("helpers", 0)) == root / "app/helpers.py"  # the script's directory
    assert p.module_file(train, Imported("lib.core", 0)) == root / "src/lib/core.py"  # a src/ layout
    assert p.module_file(train, Imported("pkg.a", 0)) == root / "pkg/a/__init__.py"
    assert p.module_file(mod, Imported("b", 2)) == root / "pkg/b.py"  # from ..b import
    assert p.module_file(mod, Imported("", 1)) == root / "pkg/a/__init__.py"  # from . import
    assert p.module_file(train, Imported("torch", 0)) is None  # not a file of the project


def test_module_resolution_follows_python_import_order(tmp_path):
    # In one sys.path entry a package (a directory with __init__.py) wins over a module of the same name; a
    # directory without __init__.py (a namespace portion) loses to a module in that entry or in a later one.
    for rel in ["app/train.py", "app/engine.py", "app/engine/__init__.py", "app/data/x.py", "data.py",
                "app/loop/readme.txt", "app/loop.py"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    p = Project(tmp_path)
    train, root = (tmp_path / "app/train.py").resolve(), tmp_path.resolve()
    assert p.module_file(train, Imported("engine", 0)) == root / "app/engine/__init__.py"
    assert p.module_file(train, Imported("data", 0)) == root / "data.py"  # namespace portions come last
    assert p.module_file(train, Imported("loop", 0)) == root / "app/loop.py"


def test_only_definitions_that_may_act_are_exported():
    text = (
        'def helper(model, opt):\n    """Call `loss.backward()` first."""\n    return 1\n\n'
        "def inner(loss):\n    loss.backward()\n\n"
        "def outer(loss):\n    inner(loss)\n\n"
        "class T:\n    def fit(self):\n        self.step_once()\n\n    def step_once(self):\n        self.opt.step()\n"
    )
    assert acting(text) == {"inner", "outer", "T.fit", "T.step_once"}  # a docstring is not code


def test_a_scheduler_of_the_projects_own_plain_class_is_not_held_to_pytorchs_order(tmp_path, run_cli):
    """cycle.py steps, before the optimizer, a scheduler of schedulers.py's own classes (no base outside that
    file, through a base of the same file too): it sets the rate for the coming step, and PyTorch's order does not
    apply. warmup.py's derives from torch's `_LRScheduler`, and delegate.py's plain wrapper sets no rate itself (it
    steps a torch scheduler it holds): both reported. Alone, a class imported from elsewhere is not known to be
    the project's own: all three are reported. chosen.py's scheduler is built by a function of schedulers.py that
    chooses among that file's own classes by configuration (silent); mixed.py's by one that may return the torch
    derived one (reported)."""
    project = _copy("own_scheduler", tmp_path)
    found = _lines(run_cli("-q", "--no-cache", ".", cwd=project).stdout)
    assert sorted(line.split(" ", 1)[0] for line in found) == [
        "delegate.py:10:9:", "mixed.py:16:13:", "warmup.py:10:9:"], found
    alone = _lines(run_cli("-q", "--no-cache", "--no-project", ".", cwd=project).stdout)
    assert sorted(line.split(" ", 1)[0] for line in alone) == [
        "chosen.py:16:13:", "cycle.py:11:13:", "delegate.py:10:9:", "mixed.py:16:13:", "warmup.py:10:9:"], alone


def test_inert_functions_touch_no_gradient_and_call_nothing_unknown():
    text = (
        "import math\nfrom lib import shrink\n\n"
        "def clamp(opt, b):\n    for p in opt.param_groups[0]['params']:\n        p.grad.data.clamp_(-b, b)\n\n"
        "def norm(opt):\n    return math.sqrt(sum(float(p.grad.norm()) for p in params_of(opt)))\n\n"
        "def params_of(opt):\n    return [p for g in opt.param_groups for p in g['params']]\n\n"
        "def wipe(opt):\n    for p in params_of(opt):\n        p.grad.data.zero_()\n\n"
        "def refill(opt):\n    _fill(opt)\n\n"
        "def _fill(opt):\n    for p in params_of(opt):\n        p.grad = torch.zeros_like(p)\n\n"
        "def handed(opt):\n    shrink(opt)\n\n"
        "class Clip:\n    def run(self, opt):\n        return opt\n"
    )
    # `math.sqrt` is a method-style call (allowed); `wipe` writes a .grad; `refill` through a helper; `handed`
    # calls a library; a class's methods are not judged
    assert inert(text) == {"clamp", "norm", "params_of"}


MODULE_FORWARD = [
    # `net = lone_coder()` from `from layers import *`: its forward clears nothing
    "fit.py:22:9: TL004 [unsafe fix] `opt.step()` runs in a loop that never clears `opt`'s gradients",
    # twin_coder's forward clears its own parameters only, not the head's
    "fit.py:34:9: TL004 [unsafe fix] `head_opt.step()` runs in a loop that never clears `head_opt`'s gradients",
]


def test_calling_a_module_of_another_file_runs_its_forward(tmp_path, run_cli):
    """`model(x)` runs the forward of the model's class, found through `import *` of a project file: a forward
    that starts with `self.zero_grad()` clears what every optimizer over the model's parameters steps (fit_twin:
    silent), not what an optimizer over another module steps."""
    project = _copy("module_forward", tmp_path)
    found = _lines(run_cli("-q", "--no-cache", ".", cwd=project).stdout)
    assert _matches(found, MODULE_FORWARD), "\n".join(found)
    alone = _lines(run_cli("-q", "--no-cache", "--no-project", ".", cwd=project).stdout)
    assert "fit.py:12:9: TL004" in "\n".join(alone)  # without layers.py, the forward is unknown


RETURNED_VALUES = [
    # `fit_batch` returns the loss it back-propagated (built by a method its file cannot see): a graph
    "main.py:9:9: TL007 [*] `fit_batch(net, opt, inp, tgt)` is still attached to its graph",
    # the second element of `fit_parts`'s tuple is a term of the loss it back-propagated
    "main.py:11:9: TL007 [*] `side` is still attached to its graph",
    # (`side.item()`, `err.item()` and a loss rebound after the backward: silent)
    # a loss function of another file that cannot act (read because the caller back-propagates): the second
    # element of what it returns carries a graph, the third is a number
    "with_losses.py:12:9: TL007 [*] `reg` is still attached to its graph",
    # `extra` (a method's result, unknown in losses.py) is a term of the loss `with_penalty` returns beside it,
    # which the caller back-propagates (its exports' `parts`); the count beside them is silent
    "with_parts.py:12:9: TL007 [*] `extra` is still attached to its graph",
    # a named tuple returned by name after a backward of its field (`got.whole.backward(); return got`, the fields
    # from `namedtuple(...)` / `class Split(NamedTuple)`): that item is known attached, also through `got` bound
    # first and unpacked after; the other items, and a named tuple of `.item()` numbers, are silent
    "with_records.py:10:9: TL007 [*] `whole` is still attached to its graph",
    "with_records.py:12:9: TL007 [*] `tail` is still attached to its graph",
]


def test_values_returned_by_another_files_function_are_known_per_tuple_element(tmp_path, run_cli):
    project = _copy("returned_values", tmp_path)
    found = _lines(run_cli("-q", "--no-cache", ".", cwd=project).stdout)
    assert _matches(found, RETURNED_VALUES), "\n".join(found)
    alone = _lines(run_cli("-q", "--no-cache", "--no-project", ".", cwd=project).stdout)
    assert alone == [], "\n".join(alone)


MADE_OBJECTS = [
    # `self.pair = build_pair(0.5)` with `def build_pair(weight) -> PairLoss` in criteria.py: calling the object runs
    # `PairLoss.__call__`, whose returned dict holds attached losses; an entry and the values of `.items()` are kept
    "runner.py:33:13: TL007 [*] `parts[\"fit\"]` is still attached to its graph",
    "runner.py:35:17: TL007 [*] `value` is still attached to its graph",
    # (`ShownLoss`, made by a factory annotated `-> "ShownLoss"`, returns a dict of numbers: silent)
]


def test_objects_made_by_another_files_factory_are_known_by_its_return_annotation(tmp_path, run_cli):
    project = _copy("made_objects", tmp_path)
    found = _lines(run_cli("-q", "--no-cache", ".", cwd=project).stdout)
    assert _matches(found, MADE_OBJECTS), "\n".join(found)
    alone = _lines(run_cli("-q", "--no-cache", "--no-project", ".", cwd=project).stdout)
    assert alone == [], "\n".join(alone)


HANDED_TOTALS = [
    # `board.record("total", total, ...)`: a method of another file's class that stores the total and hands it to
    # nothing unknown does not back-propagate it (`Deferred.hold`, whose value `release` back-propagates,
    # `Courier.send`, handing it to a library call, and `Sink.take`, back-propagating it: silent)
    "train.py:17:9: TL007 [*] `loss` is still attached to its graph and is kept in `total`",
    # the epoch's mean handed to `self.hooks.on_epoch` (`hooks=Hooks()`, a parameter's default, of hooks.py: does
    # nothing) and to `ReduceLROnPlateau.step`, a scheduler reading a number
    "train.py:71:13: TL007 [*] `loss` is still attached to its graph and is kept in `losses`",
    # (a scheduler-named object of the file's class whose step back-propagates, an object of unknown class, and a
    # parameter's default of the file whose method back-propagates: silent) a default of the file that prints it
    "train.py:140:13: TL007 [*] `loss` is still attached to its graph and is kept in `losses`",
]


def test_totals_handed_to_methods_known_not_to_back_propagate_them(tmp_path, run_cli):
    project = _copy("handed_totals", tmp_path)
    found = _lines(run_cli("-q", "--no-cache", ".", cwd=project).stdout)
    assert _matches(found, HANDED_TOTALS), "\n".join(found)
    alone = _lines(run_cli("-q", "--no-cache", "--no-project", ".", cwd=project).stdout)
    assert _matches(alone, HANDED_TOTALS[2:]), "\n".join(alone)  # the other files' methods are not known alone


KEPT_OBJECTS = [
    # `add` of another file's class adds its argument into `self.total`: the object outlives the loop
    "train.py:17:9: TL007 `err` is still attached to its graph and `mean.add` adds it into an attribute of `mean`",
    # `push` adds each item of the list it is given (a loop over its parameter); the attached item is named
    "train.py:18:9: TL007 `aux` is still attached to its graph and `cols.push` adds it into an attribute of `cols`",
    # the class's `__setitem__` appends what is stored to a list of `self`
    "train.py:19:9: TL007 `err` is still attached to its graph and `book.__setitem__` appends it to a list of `book`",
    # (a method that converts with float(), `err.item()`, an object built afresh in each iteration, and a value
    # computed under no_grad: silent)
]


def test_objects_of_another_files_class_keep_what_their_methods_store(tmp_path, run_cli):
    project = _copy("kept_objects", tmp_path)
    found = _lines(run_cli("-q", "--no-cache", ".", cwd=project).stdout)
    assert _matches(found, KEPT_OBJECTS), "\n".join(found)
    alone = _lines(run_cli("-q", "--no-cache", "--no-project", ".", cwd=project).stdout)
    assert alone == [], "\n".join(alone)


def test_a_helper_of_another_file_updating_the_scaler_is_placed_at_each_call(tmp_path, run_cli):
    """amp_utils.py's `apply_update(net, opt, clip, grad_scaler)` steps and updates: two_nets.py calls it for two
    optimizers with one scaler (two updates per iteration, reported at the first call); one_net.py once (silent).
    The update stands at the call, whose arguments are the helper's, not a scale given to `update(new_scale)`."""
    project = _copy("scaler_helper", tmp_path)
    found = _lines(run_cli("-q", "--no-cache", ".", cwd=project).stdout)
    assert [line.split(" ", 2)[:2] for line in found] == [["two_nets.py:7:9:", "TL010"]], found


def test_clipping_helpers_of_another_file_clip_at_the_call(tmp_path, run_cli):
    """A function of another file that clips (`clip_grad_norm_` under `if params:`, or each gradient clamped by
    hand) clips the scaled gradients where a loop calls it between `scaler.scale(loss).backward()` and
    `scaler.step`; one that unscales first on some path of its own is not known to clip scaled gradients."""
    (tmp_path / "gradtools.py").write_text(
        "import torch\n\n\ndef clip_grads(params, max_norm=1.0):\n"
        "    params = [p for p in params if p.grad is not None]\n    if params:\n"
        "        return torch.nn.utils.clip_grad_norm_(params, max_norm)\n\n\n"
        "def clip_gradient(optimizer, bound):\n    for group in optimizer.param_groups:\n"
        "        for p in group['params']:\n            if p.grad is not None:\n"
        "                p.grad.data.clamp_(-bound, bound)\n\n\n"
        "def unscale_and_clip(model, opt, scaler=None):\n    if scaler is not None:\n"
        "        scaler.unscale_(opt)\n    if model is not None:\n"
        "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
    )
    loop = ("import torch\nfrom gradtools import clip_grads, clip_gradient, unscale_and_clip\n\n\n"
            "def fit(model, loader, opt, scaler):\n    for x, y in loader:\n        opt.zero_grad()\n"
            "        scaler.scale(torch.nn.functional.mse_loss(model(x), y)).backward()\n"
            "        {call}\n        scaler.step(opt)\n        scaler.update()\n")
    (tmp_path / "by_norm.py").write_text(loop.format(call="clip_grads(model.parameters())"))
    (tmp_path / "by_hand.py").write_text(loop.format(call="clip_gradient(opt, 0.5)"))
    (tmp_path / "unscaled.py").write_text(loop.format(call="unscale_and_clip(model, opt, scaler)"))
    found = _lines(run_cli("-q", "--no-cache", ".", cwd=tmp_path).stdout)
    assert [f.split(" ", 2)[:2] for f in found] == [["by_hand.py:9:9:", "TL010"], ["by_norm.py:9:9:", "TL010"]], \
        "\n".join(found)
    assert "`clip_gradient` clips gradients still multiplied by the loss scale" in found[0]


def test_a_loop_that_calls_another_files_function_with_a_missing_argument_never_runs(tmp_path, run_cli):
    """`update_bank(bank, x, model, 0.1)` where utils.py's `update_bank` takes five arguments (one added later,
    the script left behind): every iteration raises TypeError there, so the retained graph of the backward
    before it never meets a next iteration. The same loop with a call that fits is reported; so is one whose
    call misses an argument only under an option (`if use_bank:`), and one after a call before the loop that
    misses one (judged only in a loop: a setup call that no longer fits its helper may be a refactor under way)."""
    (tmp_path / "utils.py").write_text(
        "def update_bank(bank, data, model, head, momentum, source=False):\n    return bank\n")
    loop = ("import torch\nfrom utils import update_bank\n\n\n"
            "def fit(model, head, loader, opt, bank, use_bank):\n    for x, y in loader:\n        opt.zero_grad()\n"
            "        loss = torch.nn.functional.cross_entropy(head(model(x)), y)\n"
            "        loss.backward(retain_graph=True)\n        {call}\n        opt.step()\n")
    (tmp_path / "stale.py").write_text(loop.format(call="bank = update_bank(bank, x, model, 0.1)"))
    (tmp_path / "fits.py").write_text(loop.format(call="bank = update_bank(bank, x, model, head, 0.1)"))
    (tmp_path / "option.py").write_text(loop.format(call="if use_bank:\n            bank = update_bank(bank, x, model, 0.1)"))
    # before the loop, a call that no longer fits may be a refactor under way: the loop is still judged
    (tmp_path / "setup.py").write_text(loop.format(call="pass").replace(
        "    for x, y", "    bank = update_bank(bank, None, model, 0.1)\n    for x, y"))
    found = _lines(run_cli("-q", "--no-cache", ".", cwd=tmp_path).stdout)
    assert [f.split(" ", 2)[:2] for f in found] == [
        ["fits.py:9:9:", "TL002"], ["option.py:9:9:", "TL002"], ["setup.py:10:9:", "TL002"]], "\n".join(found)


def test_a_function_named_like_a_method_of_a_project_module_is_that_function(tmp_path, run_cli):
    """`engine.step(model, optimizer, loss)` where `engine` is a module of the project (src/engine.py): a function
    of that file, whose backward and step the loop runs, not an optimizer named `engine` stepping."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "__init__.py").write_text("")
    (tmp_path / "src" / "engine.py").write_text(
        "def step(model, optimizer, loss):\n    loss.backward()\n    optimizer.step()\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\nfrom src import engine\n\n\ndef fit(model, loader, optimizer, criterion):\n"
        "    for x, y in loader:\n        loss = criterion(model(x), y)\n"
        "        engine.step(model, optimizer, loss)\n"
    )
    found = _lines(run_cli("-q", "--no-cache", ".", cwd=tmp_path).stdout)
    assert [f.split(" ", 2)[:2] for f in found] == [["train.py:8:9:", "TL004"]], "\n".join(found)


def test_a_module_class_of_another_file_makes_its_calls_graphs(tmp_path, run_cli):
    """`self.ranker = Critic(dim).to(device)` with `Critic` an nn.Module of another file, in a file that calls no
    function of the project: `self.ranker(x)` is a forward, so the adversarial loss a method builds from it carries
    a graph, and keeping it in a list across the batches is reported (without the other file, it is unknown)."""
    project = _copy("imported_modules", tmp_path)
    found = _lines(run_cli("-q", "--no-cache", ".", cwd=project).stdout)
    assert [f.split(" ", 2)[:2] for f in found] == [["train.py:22:17:", "TL007"]], "\n".join(found)
    alone = _lines(run_cli("-q", "--no-cache", "--no-project", ".", cwd=project).stdout)
    assert alone == []
