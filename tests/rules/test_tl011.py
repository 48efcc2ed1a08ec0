"""TL011 lr_scheduler.step() before optimizer.step()."""

import pytest

from tests.helpers import findings, fixed

POSITIVE = {
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
}

NEGATIVE = {
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
