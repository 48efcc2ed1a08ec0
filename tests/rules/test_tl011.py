"""TL011 lr_scheduler.step() before optimizer.step()."""

import json
import textwrap

import pytest

from tests.helpers import findings, fixed, lint_in_process, messages

POSITIVE = {
    # -- a learning-rate range test stepping its own scheduler first -------------------------------------------
    "lr_range_test_with_a_scheduler_of_the_file": (
        """
        class ExponentialRamp(torch.optim.lr_scheduler._LRScheduler):
            def __init__(self, optimizer, low, high, steps):
                self.low, self.high, self.steps = low, high, steps
                super().__init__(optimizer)

            def get_lr(self):
                return [self.low * (self.high / self.low) ** (self.last_epoch / self.steps) for _ in self.base_lrs]


        optimizer = torch.optim.SGD(net.parameters(), lr=1e-7)
        lr_scheduler = ExponentialRamp(optimizer, 1e-7, 10.0, 100)
        for n, (images, labels) in enumerate(loader):
            lr_scheduler.step()
            optimizer.zero_grad()
            loss_function(net(images), labels).backward()
            optimizer.step()
            if n >= 100:
                break
        """,
        [(14, 5)],
    ),
    # -- once per call: an optimizer wrapper's step(), a per-batch helper ----------------------------------------
    "wrapper_class_step": (
        """
        class OptimWrapper:
            def __init__(self, optimizer, scheduler):
                self.optimizer = optimizer
                self.scheduler = scheduler

            def step(self):
                self.scheduler.step()
                self.optimizer.step()
        """,
        [(8, 9)],
    ),
    "per_batch_helper": (
        """
        def train_step(model, batch, optimizer, scheduler):
            loss = model(batch)
            loss.backward()
            scheduler.step()
            optimizer.step()
            optimizer.zero_grad()
        """,
        [(5, 5)],
    ),
    "wrapper_with_scaler": (
        """
        class AmpStepper:
            def step(self, loss):
                self.scaler.scale(loss).backward()
                self.lr_scheduler.step()
                self.scaler.step(self.optimizer)
                self.scaler.update()
        """,
        [(5, 9)],
    ),
    # -- an epoch loop that steps the scheduler before a training function that steps the optimizer ------------
    "epoch_loop_before_training_function": (
        """
        def train_one_epoch(model, loader, optimizer):
            for x, y in loader:
                optimizer.zero_grad()
                F.mse_loss(model(x), y).backward()
                optimizer.step()

        for epoch in range(10):
            scheduler.step()
            train_one_epoch(model, loader, optimizer)
        """,
        [(9, 5)],
    ),
    "script": (
        """
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            scheduler.step()
            optimizer.step()
            optimizer.zero_grad()
        """,
        [(5, 5)],
    ),
    "top_of_iteration": (
        """
        def train(model, loader, opt, lr_scheduler):
            for x, y in loader:
                lr_scheduler.step()
                opt.zero_grad()
                F.mse_loss(model(x), y).backward()
                opt.step()
        """,
        [(4, 9)],
    ),
    "wrapper_method": (
        """
        class Trainer:
            def update(self):
                self.scheduler.step()
                self.optimizer.step()
                self.optimizer.zero_grad()

            def fit(self):
                for batch in self.loader:
                    self.model(batch).loss.backward()
                    self.update()
        """,
        [(4, 9)],
    ),
    "nested_batch_loop": (
        """
        for epoch in range(3):
            for x, y in loader:
                crit(model(x), y).backward()
                sched.step()
                opt.step()
                opt.zero_grad()
        """,
        [(5, 9)],
    ),
    "scaler": (
        """
        for x, y in loader:
            scaler.scale(criterion(model(x), y)).backward()
            scheduler.step()
            scaler.step(optimizer)
            scaler.update()
        """,
        [(4, 5)],
    ),
    "accumulation_guard": (
        """
        for i, (x, y) in enumerate(loader):
            (crit(model(x), y) / k).backward()
            if (i + 1) % k == 0:
                warmup_scheduler.step()
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(5, 9)],
    ),
    "while_loop": (
        """
        scheduler = OneCycleLR(optimizer, max_lr=0.1, total_steps=n)
        while step < n:
            loss_fn(net(x), y).backward()
            scheduler.step()
            optimizer.step()
            step += 1
        """,
        [(5, 5)],
    ),
    "gan_generator": (
        """
        for real in loader:
            errD.backward()
            optimizerD.step()
            errG.backward()
            schedulerG.step()
            optimizerG.step()
        """,
        [(6, 5)],
    ),
    "run_through_a_helper_of_the_file": (
        """
        def _epoch(model, loader, optimizer):
            for x, y in loader:
                optimizer.zero_grad()
                model(x).sub(y).pow(2).mean().backward()
                optimizer.step()

        def train(model, loader, optimizer):
            model.train()
            return _epoch(model, loader, optimizer=optimizer)

        sched = torch.optim.lr_scheduler.StepLR(adam, 5)
        for epoch in range(3):
            sched.step()
            train(net, data, optimizer=adam)
        """,
        [(14, 5)],
    ),
    # -- an epoch loop that steps the scheduler before its batch loop: the first epoch skips the first rate ------
    "epoch_loop_before_batch_loop": (
        """
        for epoch in range(10):
            scheduler.step()
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
        """,
        [(3, 5)],
    ),
    "epoch_loop_before_accumulating_batch_loop": (
        """
        def train(model, loader, epochs, k):
            optimizer = torch.optim.AdamW(model.parameters())
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs)
            for epoch in range(epochs):
                scheduler.step()
                for i, (x, y) in enumerate(loader):
                    (criterion(model(x), y) / k).backward()
                    if (i + 1) % k == 0:
                        optimizer.step()
                        optimizer.zero_grad()
        """,
        [(6, 9)],
    ),
    "gan_scheduler_before_its_optimizers_batch_loop": (
        """
        optimizer_g = torch.optim.Adam(gen.parameters())
        optimizer_d = torch.optim.Adam(disc.parameters())
        scheduler_d = torch.optim.lr_scheduler.StepLR(optimizer_d, 10)
        for epoch in range(10):
            for x in loader:
                gen_loss(x).backward()
                optimizer_g.step()
                optimizer_g.zero_grad()
            scheduler_d.step()
            for x in loader:
                disc_loss(x).backward()
                optimizer_d.step()
                optimizer_d.zero_grad()
        """,
        [(10, 5)],
    ),
    "presence_guard_before_training_function": (
        """
        def train_epoch(model, loader, optimizer):
            for x, y in loader:
                optimizer.zero_grad()
                F.mse_loss(model(x), y).backward()
                optimizer.step()


        def main(model, loader, epochs, scheduler=None):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(epochs):
                if scheduler is not None:
                    scheduler.step()
                train_epoch(model, loader, optimizer)
        """,
        [(13, 13)],
    ),
    "presence_guard_before_batch_loop_in_a_method": (
        """
        class Trainer:
            def __init__(self, model):
                self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                self.lr_scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, 5)

            def fit(self, loader, epochs):
                for epoch in range(epochs):
                    if self.lr_scheduler:
                        self.lr_scheduler.step()
                    for batch in loader:
                        self.optimizer.zero_grad()
                        self.model(batch).loss.backward()
                        self.optimizer.step()
        """,
        [(10, 17)],
    ),
    # -- once per call, before the function's own loop: a train_epoch() called once per epoch ---------------------
    "epoch_function_before_its_batch_loop": (
        """
        def run_epoch(net, batches, opt, sched, crit):
            net.train()
            sched.step()
            for inputs, targets in batches:
                opt.zero_grad()
                crit(net(inputs), targets).backward()
                opt.step()
        """,
        [(4, 5)],
    ),
    "epoch_method_presence_guard_before_accumulating_loop": (
        """
        class Runner:
            def one_epoch(self):
                if self.lr_sched is not None:
                    self.lr_sched.step()
                for i, batch in enumerate(self.batches):
                    self.net(batch).mean().backward()
                    if (i + 1) % self.accum == 0:
                        self.opt.step()
                        self.opt.zero_grad()
        """,
        [(5, 13)],
    ),
    # -- guards: a configuration flag, or the same condition tested again around the optimizer's step ------------
    "configuration_guard_before_the_step": (
        """
        for batch in loader:
            net(batch).mean().backward()
            if cfg.noam_schedule and cfg.mode == "step":
                sched.step()
            opt.step()
            opt.zero_grad()
        """,
        [(5, 9)],
    ),
    "phase_guard_tested_again_in_the_batch_loop": (
        """
        for epoch in range(epochs):
            for phase in ["train", "val"]:
                if phase == "train":
                    sched.step()
                for x, y in loaders[phase]:
                    out = net(x)
                    if phase == "train":
                        crit(out, y).backward()
                        opt.step()
                        opt.zero_grad()
        """,
        [(5, 13)],
    ),
    # -- a guard that holds in the loop's first pass: a flag set true before the loop, cleared after the step ----
    "flag_true_before_the_loop_cleared_after_the_step": (
        """
        for epoch in range(epochs):
            for batch in loader:
                leading = True
                for head in heads:
                    crit(net(batch, head)).backward()
                    if leading and (count < warm or cfg.linear):
                        warm_sched.step()
                    opt.step()
                    opt.zero_grad()
                    if leading:
                        count += 1
                        leading = False
        """,
        [(8, 17)],
    ),
    "scheduler_set_to_the_count_about_to_run": (
        """
        class Agent:
            def update(self):
                self.updates += 1
                if self.cfg.warmup > 0 and self.warming():
                    self.warm_sched.step(epoch=self.updates)
                if self.cfg.schedule == "rsqrt":
                    self.lr_sched.step(self.updates)
                self.optimizer.step()
        """,
        [(6, 13), (8, 13)],
    ),
    "loop_sets_the_scheduler_to_the_next_count": (
        """
        done = 0
        for x, y in loader:
            crit(net(x), y).backward()
            done += 1
            sched.step(done)
            opt.step()
            opt.zero_grad()
        """,
        [(6, 5)],
    ),
    # -- a step repeated in the iteration, a test of the scheduler's type, a scheduler a factory builds -----------
    "scheduler_stepped_in_a_repeat_loop_before_the_optimizer": (
        """
        for batch in loader:
            scaler.scale(model(batch)).backward()
            for _ in range(accumulate):
                scheduler.step()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
        """,
        [(5, 9)],
    ),
    "scheduler_stepped_on_the_branch_of_its_type_test": (
        """
        for batch in loader:
            model(batch).backward()
            if isinstance(scheduler, WarmupByBatch):
                scheduler.step_batch(step)
            else:
                scheduler.step()
            optimizer.step()
            optimizer.zero_grad()
        """,
        [(7, 9)],
    ),
    "scheduler_built_by_a_factory_given_options_first": (
        """
        def train_one_epoch(params, model, optimizer, scheduler, loader):
            for batch in loader:
                model(batch).backward()
                scheduler.step()
                optimizer.step()
                optimizer.zero_grad()


        def run(params, model, loader):
            optimizer = torch.optim.AdamW(model.parameters())
            scheduler = get_scheduler(params, optimizer)
            for epoch in range(params.epochs):
                train_one_epoch(params, model, optimizer, scheduler, loader)
        """,
        [(5, 9)],
    ),
}

NEGATIVE = {
    "flag_true_before_the_loop_cleared_before_the_scheduler": """
        leading = True
        for batch in loader:
            crit(net(batch)).backward()
            leading = False
            if leading:
                sched.step()
            opt.step()
            opt.zero_grad()
        """,
    "flag_true_before_the_loop_or_a_counter": """
        leading = False
        for i, batch in enumerate(loader):
            crit(net(batch)).backward()
            if leading or i > 3:
                sched.step()
            opt.step()
            opt.zero_grad()
            leading = True
        """,
    "flag_true_before_the_loop_and_a_counter": """
        leading = True
        for i, batch in enumerate(loader):
            crit(net(batch)).backward()
            if leading and i > 0:
                sched.step()
            opt.step()
            opt.zero_grad()
        """,
    "scheduler_set_to_the_count_of_steps_taken": """
        class Agent:
            def update(self):
                self.optimizer.step()
                self.updates += 1
                self.lr_sched.step(self.updates)

        done = 0
        for x, y in loader:
            sched.step(done)
            crit(net(x), y).backward()
            opt.step()
            opt.zero_grad()
            done += 1
        """,
    "scheduler_handed_a_value_or_the_loop_epoch": """
        for epoch in range(10):
            sched.step(epoch)
            for x, y in loader:
                crit(net(x), y).backward()
                opt.step()
                opt.zero_grad()
        seen = 0
        for x, y in loader:
            crit(net(x), y).backward()
            seen += len(x)
            plateau_sched.step(seen)
            opt.step()
            opt.zero_grad()
        """,
    "guard_of_the_iteration_counter": """
        for i, batch in enumerate(loader):
            net(batch).mean().backward()
            if i > 0:
                sched.step()
            opt.step()
            opt.zero_grad()
        """,
    "guard_that_calls": """
        for batch in loader:
            net(batch).mean().backward()
            if warmup.active():
                sched.step()
            opt.step()
            opt.zero_grad()
        """,
    "guard_of_a_flag_the_loop_sets": """
        started = False
        for batch in loader:
            net(batch).mean().backward()
            if started:
                sched.step()
            opt.step()
            opt.zero_grad()
            started = True
        """,
    "same_condition_after_its_name_is_rebound": """
        for epoch in range(epochs):
            for phase in ["train", "val"]:
                if phase == "train":
                    sched.step()
                phase = next_phase(phase)
                for x, y in loaders[phase]:
                    if phase == "train":
                        crit(net(x), y).backward()
                        opt.step()
        """,
    "attribute_flag_with_an_unknown_method_of_self_in_the_loop": """
        class Loop:
            def fit(self):
                for batch in self.batches:
                    self.net(batch).mean().backward()
                    if self.scheduling:
                        self.sched.step()
                    self.toggle()
                    self.opt.step()
        """,
    "epoch_function_steps_the_scheduler_from_the_second_epoch": """
        def run_epoch(net, batches, opt, sched, epoch):
            if epoch > 0:
                sched.step()
            for inputs, targets in batches:
                opt.zero_grad()
                net(inputs, targets).backward()
                opt.step()
        """,
    "epoch_function_steps_the_scheduler_after_its_loop": """
        def run_epoch(net, batches, opt, sched):
            for inputs, targets in batches:
                opt.zero_grad()
                net(inputs, targets).backward()
                opt.step()
            sched.step()
        """,
    "epoch_function_resumes_the_schedule_with_an_epoch": """
        def run_epoch(net, batches, opt, sched, epoch):
            sched.step(epoch)
            for inputs, targets in batches:
                opt.zero_grad()
                net(inputs, targets).backward()
                opt.step()
        """,
    "epoch_function_trains_only_under_a_guard_of_its_own": """
        def run_epoch(net, batches, opt, sched, epoch, warm):
            sched.step()
            if epoch >= warm:
                for inputs, targets in batches:
                    opt.zero_grad()
                    net(inputs, targets).backward()
                    opt.step()
        """,
    "epoch_function_loop_only_validates": """
        def evaluate(net, batches, sched):
            sched.step()
            with torch.no_grad():
                for inputs, targets in batches:
                    print(net(inputs, targets))
        """,
    "epoch_loop_steps_the_scheduler_from_the_second_epoch": """
        for epoch in range(10):
            if epoch > 0:
                scheduler.step()
            for x, y in loader:
                criterion(model(x), y).backward()
                optimizer.step()
                optimizer.zero_grad()
        """,
    "batch_loop_under_a_guard_of_its_own": """
        for epoch in range(10):
            scheduler.step()
            if epoch >= warmup_epochs:
                for x, y in loader:
                    criterion(model(x), y).backward()
                    optimizer.step()
                    optimizer.zero_grad()
        """,
    "scheduler_after_its_own_batch_loop_before_the_other": """
        optimizer_g = torch.optim.Adam(gen.parameters())
        optimizer_d = torch.optim.Adam(disc.parameters())
        scheduler_g = torch.optim.lr_scheduler.StepLR(optimizer_g, 10)
        for epoch in range(10):
            for x in loader:
                gen_loss(x).backward()
                optimizer_g.step()
                optimizer_g.zero_grad()
            scheduler_g.step()
            for x in loader:
                disc_loss(x).backward()
                optimizer_d.step()
                optimizer_d.zero_grad()
        """,
    "epoch_loop_before_a_loop_that_only_validates": """
        for epoch in range(10):
            scheduler.step()
            with torch.no_grad():
                for x, y in val_loader:
                    total += criterion(model(x), y).item()
        """,
    "run_through_a_helper_of_the_file_in_order": """
        def _epoch(model, loader, optimizer):
            for x, y in loader:
                optimizer.zero_grad()
                model(x).sub(y).pow(2).mean().backward()
                optimizer.step()

        def train(model, loader, optimizer):
            return _epoch(model, loader, optimizer=optimizer)

        sched = torch.optim.lr_scheduler.StepLR(adam, 5)
        other = torch.optim.lr_scheduler.StepLR(sgd, 5)
        for epoch in range(3):
            other.step()
            train(net, data, optimizer=adam)
            sched.step()
        """,
    "wrapper_in_order": """
        class OptimWrapper:
            def step(self):
                self.optimizer.step()
                self.scheduler.step()
        """,
    "helper_warmup_guarded_scheduler": """
        def step(optimizer, scheduler, warm):
            if warm:
                scheduler.step()
            optimizer.step()
        """,
    "helper_scheduler_with_epoch_argument": """
        def resume(optimizer, scheduler, epoch):
            scheduler.step(epoch)
            optimizer.step()
        """,
    "epoch_loop_after_training_function": """
        def train_one_epoch(model, loader, optimizer):
            for x, y in loader:
                optimizer.zero_grad()
                F.mse_loss(model(x), y).backward()
                optimizer.step()

        for epoch in range(10):
            train_one_epoch(model, loader, optimizer)
            scheduler.step()
        """,
    "after_step": """
        for x, y in loader:
            criterion(model(x), y).backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        """,
    "resume": """
        scheduler.step(start_epoch)
        for x, y in loader:
            criterion(model(x), y).backward()
            optimizer.step()
        """,
    "per_epoch_after_inner_loop": """
        for epoch in range(10):
            for x, y in loader:
                criterion(model(x), y).backward()
                optimizer.step()
                optimizer.zero_grad()
            scheduler.step()
        """,
    "plateau_with_metric": """
        for epoch in range(10):
            train(model)
            val_loss = validate(model)
            scheduler.step(val_loss)
        """,
    "plateau_in_loop_with_metric": """
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            scheduler.step(loss.item())
            optimizer.step()
        """,
    "scheduler_in_other_branch": """
        for i, (x, y) in enumerate(loader):
            if i == 0:
                scheduler.step()
            criterion(model(x), y).backward()
            optimizer.step()
        """,
    "no_optimizer_step_in_loop": """
        for epoch in range(10):
            train_one_epoch()
            scheduler.step()
        """,
    "wrapper_in_right_order": """
        class Trainer:
            def update(self):
                self.optimizer.step()
                self.scheduler.step()

            def fit(self):
                for b in self.loader:
                    self.loss(b).backward()
                    self.update()
        """,
    # a repeat loop that trains: the scheduler steps once per optimizer step, after it
    "scheduler_after_the_optimizer_in_a_loop_of_updates": (
        """
        for batch in loader:
            for _ in range(updates_per_batch):
                model(batch).backward()
                optimizer.step()
                optimizer.zero_grad()
                scheduler.step()
        """
    ),
    # the scheduler a factory builds on the discriminator's optimizer is stepped after that optimizer
    "factory_scheduler_of_the_other_optimizer": (
        """
        def run(cfg, loader):
            opt_g = torch.optim.Adam(gen.parameters())
            opt_d = torch.optim.Adam(disc.parameters())
            sched_d = make_scheduler(cfg, opt_d)
            for batch in loader:
                disc_loss(batch).backward()
                opt_d.step()
                sched_d.step()
                opt_d.zero_grad()
                gen_loss(batch).backward()
                opt_g.step()
                opt_g.zero_grad()
        """
    ),
}


@pytest.mark.parametrize("name", POSITIVE)
def test_positive(name):
    src, expected = POSITIVE[name]
    assert findings(src, "TL011") == expected


@pytest.mark.parametrize("name", NEGATIVE)
def test_negative(name):
    assert findings(NEGATIVE[name], "TL011") == []


def test_fix_moves_scheduler_after_step():
    out = fixed(POSITIVE["script"][0], "TL011")
    assert "    optimizer.step()\n    scheduler.step()\n    optimizer.zero_grad()\n" in out
    assert fixed(out, "TL011") == out


def test_fix_in_wrapper_and_after_scaler_update():
    assert "        self.optimizer.step()\n        self.scheduler.step()\n" in fixed(POSITIVE["wrapper_method"][0], "TL011")
    assert fixed(POSITIVE["scaler"][0], "TL011").endswith("    scaler.update()\n    scheduler.step()\n")


def test_fix_moves_scheduler_after_the_batch_loop():
    out = fixed(POSITIVE["epoch_loop_before_batch_loop"][0], "TL011")
    assert out.endswith("        optimizer.step()\n    scheduler.step()\n")
    assert "for epoch in range(10):\n    for x, y in loader:" in out
    assert findings(out, "TL011") == []
    assert fixed(out, "TL011") == out


def test_no_fix_moves_a_guarded_scheduler_out_of_its_guard():
    for name in ("presence_guard_before_training_function", "presence_guard_before_batch_loop_in_a_method"):
        src = POSITIVE[name][0]
        assert findings(src, "TL011") and fixed(src, "TL011") == textwrap.dedent(src)


def test_fix_in_optimizer_wrapper():
    out = fixed(POSITIVE["wrapper_class_step"][0], "TL011")
    assert "        self.optimizer.step()\n        self.scheduler.step()\n" in out
    assert findings(out, "TL011") == []


def test_notebook_epoch_loop_before_a_training_function_of_an_earlier_cell(tmp_path):
    import json

    from torchlint.notebook import lint_notebook
    from torchlint.rules import ALL_RULES

    cells = [
        "def train(model, loader, optimizer):\n    for x, y in loader:\n        optimizer.zero_grad()\n"
        "        F.mse_loss(model(x), y).backward()\n        optimizer.step()\n",
        "for epoch in range(5):\n    scheduler.step()\n    train(model, loader, optimizer)\n",
    ]
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                     "source": c.splitlines(keepends=True)} for c in cells], "metadata": {}, "nbformat": 4,
          "nbformat_minor": 5}
    found = lint_notebook(json.dumps(nb), "nb.ipynb", ALL_RULES)
    assert [(d.cell, d.line, d.column, d.code) for d in found] == [(2, 2, 5, "TL011")]


def test_message():
    """The full text of the finding, so a change of wording is seen here."""
    assert messages(POSITIVE["lr_range_test_with_a_scheduler_of_the_file"][0], "TL011") == [(
        14, 5,
        "`lr_scheduler.step()` runs before `optimizer.step()` in the same iteration: the schedule's "
        "first learning rate is skipped ('Detected call of lr_scheduler.step() before "
        "optimizer.step()'); step the scheduler after the optimizer",
    )]


def test_a_boundary_scheduler_at_the_top_of_epochs_numbered_from_one_is_reported():
    """`MultiStepLR(opt, milestones=[...])` stepped first in `for epoch in range(1, n + 1)`: each decay comes one
    epoch before the step that follows it would bring it, the order PyTorch warns about; projects have fixed this
    shape as a bug, so the 1-based numbering does not make it the intended schedule."""
    src = """\
import torch
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[20, 40], gamma=0.1)
for epoch in range(1, epochs + 1):
    scheduler.step()
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
"""
    assert findings(src, "TL011") == [(5, 5)]


# A scheduler class of the file that sets the rate for the step about to run (no torch base): stepped first on
# purpose, so PyTorch's order does not bind it.
OWN_CLASS = """
    class {cls}:
        def __init__(self, opt, steps):
            self.opt, self.steps, self.n = opt, steps, 0

        def step(self):
            self.n += 1
            {body}

    class {sub}

    def fit(net, batches, opt, sched):
        for x, y in batches:
            opt.zero_grad()
            loss_fn(net(x), y).backward()
            if sched is not None:
                sched.step()
            opt.step()

    def main(net, batches, linear):
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        sched = None
        if linear:
            sched = {built}(opt, len(batches))
        fit(net, batches, opt, sched)
"""


RATE_WRITE = """for g in self.opt.param_groups:
                g["lr"] = 0.1 * (1 - self.n / self.steps)"""


def _own(cls="LinearDecay", sub="Stepped(LinearDecay): pass", built="LinearDecay", body=RATE_WRITE):
    return OWN_CLASS.format(cls=cls, sub=sub, built=built, body=body)


@pytest.mark.parametrize("src", [
    _own(),
    _own(cls="LinearDecay(object)"),
    _own(built="Stepped"),  # through a base of the file
])
def test_a_scheduler_of_the_files_own_plain_class_is_not_flagged(src):
    assert findings(src, "TL011") == []


@pytest.mark.parametrize("src", [
    _own(cls="LinearDecay(torch.optim.lr_scheduler.LambdaLR)"),  # a torch scheduler after all
    _own(sub="Stepped(_LRScheduler): pass", built="Stepped"),
    _own(built="StepLR"),  # torch's own
    _own(built="make_scheduler"),  # a factory: what it returns is not known
    _own().replace("sched = None\n", "sched = None\n        sched = other\n"),  # one binding not known
    _own(body="self.inner.step()\n            self.n += 1"),  # a plain wrapper that sets no rate itself (it may step a torch scheduler)
])
def test_a_scheduler_not_known_to_be_of_a_plain_project_class_is_flagged(src):
    assert findings(src, "TL011") == [(18, 13)]


# An LR range test: the rate rises each batch, the rate applied and the loss are recorded, the sweep stops when
# the loss diverges.
RANGE_TEST = """
    rates, losses = [], []
    sweep = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=1.1)
    for x, y in loader:
        sweep.step()
        opt.zero_grad()
        loss = crit(net(x), y)
        {stop}
        loss.backward()
        opt.step()
        {record}
        losses.append(loss.item())
"""


def _range(stop="if torch.isnan(loss) or loss.item() > 4 * best:\n            break",
           record='rates.append(opt.param_groups[0]["lr"])'):
    return RANGE_TEST.format(stop=stop, record=record)


@pytest.mark.parametrize("src", [
    _range(),
    _range(record="rates.append(sweep.get_last_lr()[0])"),
    _range(record='lr = opt.param_groups[0]["lr"]\n        rates.append(lr)'),
    _range(stop="if not torch.isfinite(loss):\n            print('diverged')\n            break"),
])
def test_lr_range_test_is_not_flagged(src):
    assert findings(src, "TL011") == []


@pytest.mark.parametrize("src", [
    _range(stop="pass"),  # runs to the end of the loader: a schedule followed in training
    _range(stop="if step > 100:\n            break"),  # stops on a count, not on the loss
    _range(record="rates.append(0.1)"),  # not the applied rate
    _range(record='print(opt.param_groups[0]["lr"])'),  # shown, not recorded with the loss
    _range(stop="for _ in range(3):\n            if torch.isnan(loss):\n                break"),  # an inner loop's
])
def test_a_loop_that_is_no_range_test_is_flagged(src):
    assert findings(src, "TL011") == [(5, 5)]


def test_fix_moves_the_scheduler_after_the_epoch_functions_loop():
    out = fixed(POSITIVE["epoch_function_before_its_batch_loop"][0], "TL011")
    assert out.endswith("        opt.step()\n    sched.step()\n")
    assert findings(out, "TL011") == []
    src = POSITIVE["epoch_method_presence_guard_before_accumulating_loop"][0]
    assert fixed(src, "TL011") == textwrap.dedent(src)  # not out of its guard


def test_message_epoch_function():
    """The full text of the finding, so a change of wording is seen here."""
    assert messages(POSITIVE["epoch_function_before_its_batch_loop"][0], "TL011") == [(
        4, 5,
        "`sched.step()` runs before the loop of `run_epoch()` whose `opt.step()` it schedules: in the first call "
        "the scheduler steps before the optimizer has stepped once, so the schedule's first learning rate is "
        "skipped and every call trains with the next one ('Detected call of lr_scheduler.step() before "
        "optimizer.step()'); step the scheduler after the loop",
    )]


def test_a_scheduler_stepped_while_its_order_warning_is_silenced():
    """YOLO trainers step the scheduler at the top of each epoch under `warnings.catch_warnings()` (with
    `last_epoch = start_epoch - 1` set before): the order is chosen, knowing PyTorch's warning."""
    src = """
        import warnings
        for epoch in range(start_epoch, epochs):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                scheduler.step()
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
        """
    assert findings(src, "TL011") == []
    assert findings(src.replace("with warnings.catch_warnings():", "if True:"), "TL011") == [(6, 9)]


def test_a_scheduler_bound_only_to_none_never_steps():
    """`self.lr_scheduler = None` and no other binding in the class: the step under `if self.lr_scheduler is not
    None:` never runs."""
    src = """
        class Model:
            def setup(self):
                self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.1)
                self.lr_scheduler = None

            def train_epoch(self, loader):
                if self.lr_scheduler is not None:
                    self.lr_scheduler.step()
                for x, y in loader:
                    self.optimizer.zero_grad()
                    self.loss(self.net(x), y).backward()
                    self.optimizer.step()
    """
    assert findings(src, "TL011") == []
    built = src.replace("self.lr_scheduler = None", "self.lr_scheduler = StepLR(self.optimizer, 10)")
    assert findings(built, "TL011") == [(9, 13)]


_BASE_LOOP = """
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                self.lr_scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, 10)

            def unit_train(self, batch):
                raise NotImplementedError

            def train_epoch(self, loader):
                for batch in loader:
                    self.lr_scheduler.step()
                    self.unit_train(batch)

        class MseTrainer(Trainer):
            def unit_train(self, batch):
                x, y = batch
                loss = F.mse_loss(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                {step}
        {other}
        """


def test_a_base_loop_runs_the_step_its_one_subclass_writes():
    """The base's `unit_train` only raises: `self.unit_train(batch)` runs the subclass's, which steps."""
    src = _BASE_LOOP.format(step="self.optimizer.step()", other="")
    assert findings(src, "TL011") == [(13, 13)]


def test_a_base_loop_whose_subclass_does_not_step_there():
    src = _BASE_LOOP.format(step="pass", other="")
    assert findings(src, "TL011") == []


_SECOND = """
        class L1Trainer(Trainer):
            def unit_train(self, batch):
                return None
"""


def test_a_base_loop_with_two_subclasses_writing_the_step_is_not_guessed():
    """Two overrides: which one runs depends on the instance; the analysis does not pick one."""
    src = _BASE_LOOP.format(step="self.optimizer.step()", other=_SECOND)
    assert findings(src, "TL011") == []


_RATE_HELPER = """
    def set_rate(opt, lr):
        for g in opt.param_groups:
            g["lr"] = lr
"""


def test_a_scheduler_of_the_file_that_sets_the_rate_through_a_helper_of_the_file():
    """`set_rate(self.opt, lr)`, a function of the file that writes `g["lr"]`: the class sets the rate itself."""
    src = _own(body="set_rate(self.opt, 0.1 * (1 - self.n / self.steps))") + _RATE_HELPER
    assert findings(src, "TL011") == []
    assert findings(_own(body="set_other(self.opt, 0.1)") + _RATE_HELPER, "TL011") == [(17, 13)]


def test_a_project_scheduler_that_sets_the_rate_through_a_helper_of_its_file(tmp_path):
    """The class is imported from the project's `sched.py`, whose `adjust_lr` writes the rate."""
    (tmp_path / "sched.py").write_text(
        "def adjust_lr(optimizer, lr):\n    for g in optimizer.param_groups:\n        g['lr'] = lr\n\n\n"
        "class Warmup:\n    def __init__(self, optimizer):\n        self.optimizer, self.n = optimizer, 0\n\n"
        "    def step(self):\n        self.n += 1\n        adjust_lr(self.optimizer, 0.1 * min(1.0, self.n / 100))\n")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom sched import Warmup\n\n\ndef fit(net, loader, crit):\n"
        "    opt = torch.optim.SGD(net.parameters(), lr=0.1)\n    sched = Warmup(opt)\n    for x, y in loader:\n"
        "        opt.zero_grad()\n        crit(net(x), y).backward()\n        sched.step()\n        opt.step()\n")
    code, out = lint_in_process(tmp_path, "--select", "TL011", ".")
    assert code == 0 and json.loads(out) == []
    (tmp_path / "sched.py").write_text((tmp_path / "sched.py").read_text().replace("adjust_lr(self", "print(self"))
    code, out = lint_in_process(tmp_path, "--select", "TL011", "--no-cache", ".")
    assert [(d["path"], d["line"]) for d in json.loads(out)] == [("train.py", 11)]


_EPOCH_METHOD = """
        class Trainer:
            def __init__(self, args, model):
                self.args, self.model, self.epoch = args, model, 0
                self.optimizer = optim.Adam(model.parameters())
                self.lr_scheduler = optim.lr_scheduler.StepLR(self.optimizer, step_size=args.decay_step)

            def train(self):
                for epoch in range(self.args.num_epochs):
                    self.train_one_epoch(epoch)
                    self.epoch += 1

            def train_one_epoch(self, epoch):
                if {guard}:
                    self.lr_scheduler.step()
                for batch in self.loader:
                    self.optimizer.zero_grad()
                    self.loss(batch).backward()
                    self.optimizer.step()
        """


def test_an_epoch_method_stepping_its_scheduler_first_under_a_configuration_flag():
    """`if self.args.enable_lr_schedule:` is the same on every call: whenever it holds, the first rate is skipped."""
    assert findings(_EPOCH_METHOD.format(guard="self.args.enable_lr_schedule"), "TL011") == [(15, 13)]


@pytest.mark.parametrize("guard", ["epoch > 0", "self.epoch > 0", "self.warm()"])
def test_an_epoch_method_stepping_its_scheduler_under_a_changing_condition(guard):
    """A condition that may change from one call to the next may be what delays the scheduler (`epoch > 0`)."""
    assert findings(_EPOCH_METHOD.format(guard=guard), "TL011") == []


@pytest.mark.parametrize("name, built", [
    ("pipeline_schedule", "ScheduleGPipe(stage, n_microbatches=4)"),  # runs the pipeline's forwards and backwards
    ("noise_scheduler", "DDPMScheduler(num_train_timesteps=1000)"),  # a diffusion sampler's step
    ("sched", "ScheduleGPipe(stage, n_microbatches=4)"),
    ("kl_scheduler", "make_annealing(cfg)"),
])
def test_a_schedule_of_something_else_than_the_learning_rate(name, built):
    src = f"""
    {name} = {built}
    for x, y in loader:
        opt.zero_grad()
        {name}.step()
        opt.step()
    """
    assert findings(src, "TL011") == []
    assert findings(src.replace(f"{name} = {built}", f"{name} = torch.optim.lr_scheduler.StepLR(opt, 10)")
                    .replace(name, "lr_sched"), "TL011") == [(5, 5)]
