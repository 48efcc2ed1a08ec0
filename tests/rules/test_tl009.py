"""TL009 optimizer.step() before loss.backward()."""

import pytest

from tests.helpers import findings, fixed, messages

POSITIVE = {
    # -- inside a method or helper the loop calls ------------------------------------------------------------
    "method_with_zero_grad_between": (
        """
        class Trainer:
            def train_step(self, batch):
                self.optimizer.step()
                self.optimizer.zero_grad()
                loss = self.model(batch)
                loss.backward()

            def fit(self, loader):
                for batch in loader:
                    self.train_step(batch)
        """,
        [(4, 9)],
    ),
    "helper_function": (
        """
        def step_fn(model, x, opt):
            opt.step()
            loss = model(x).mean()
            loss.backward()

        for x in data:
            step_fn(model, x, optimizer)
        """,
        [(3, 5)],
    ),
    "helper_zero_grad_then_step_then_backward": (
        """
        def helper(model, x, opt):
            opt.zero_grad()
            opt.step()
            model(x).sum().backward()

        for x in data:
            helper(model, x, optimizer)
        """,
        [(4, 5)],
    ),
    "script": (
        """
        for x, y in loader:
            optimizer.zero_grad()
            optimizer.step()
            loss = criterion(model(x), y)
            loss.backward()
        """,
        [(4, 5)],
    ),
    "step_first_line": (
        """
        def train(model, loader, opt):
            for x, y in loader:
                opt.step()
                opt.zero_grad()
                F.mse_loss(model(x), y).backward()
        """,
        [(4, 9)],
    ),
    "trainer": (
        """
        class Trainer:
            def fit(self):
                for batch in self.loader:
                    self.optimizer.zero_grad()
                    self.optimizer.step()
                    self.model(batch).loss.backward()
        """,
        [(6, 13)],
    ),
    "scaler_step_first": (
        """
        for x, y in loader:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
            scaler.scale(criterion(model(x), y)).backward()
        """,
        [(3, 5)],
    ),
    "nested_epoch": (
        """
        for epoch in range(10):
            for i, (x, y) in enumerate(loader):
                optimizer.step()
                loss = crit(model(x), y)
                loss.backward()
        """,
        [(4, 9)],
    ),
    "while_loop": (
        """
        while step < n:
            opt.zero_grad()
            opt.step()
            l = loss_fn(net(xs[step]), ys[step])
            l.backward()
            step += 1
        """,
        [(4, 5)],
    ),
    "gan_generator_step_first": (
        """
        for real in loader:
            optimizerG.step()
            optimizerG.zero_grad()
            errG = bce(netD(netG(z)), ones)
            errG.backward()
        """,
        [(3, 5)],
    ),
    "lightning_manual": (
        """
        class M(LightningModule):
            def training_step(self, batch, idx):
                opt = self.optimizers()
                for micro in batch:
                    opt.step()
                    opt.zero_grad()
                    self.manual_backward(self.loss(micro))
        """,
        [(6, 13)],
    ),
}

NEGATIVE = {
    "helper_deferred_step_for_the_previous_batch": """
        def helper(model, x, opt, first):
            if not first:
                opt.step()
                opt.zero_grad()
            model(x).sum().backward()

        for i, x in enumerate(data):
            helper(model, x, optimizer, i == 0)
        """,
    "method_in_order": """
        class T:
            def train_step(self, batch):
                loss = self.model(batch)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()

            def fit(self, loader):
                for batch in loader:
                    self.train_step(batch)
        """,
    "helper_with_closure": """
        def closure_user(model, x, opt):
            def closure():
                opt.zero_grad()
                loss = model(x).sum()
                loss.backward()
                return loss
            opt.step(closure)

        for x in data:
            closure_user(model, x, optimizer)
        """,
    "correct_order": """
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        """,
    "lbfgs_closure": """
        for x, y in loader:
            def closure():
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                return loss
            optimizer.step(closure)
        """,
    "guarded_window_start": """
        for i, (x, y) in enumerate(loader):
            if i > 0 and i % k == 0:
                optimizer.step()
                optimizer.zero_grad()
            (criterion(model(x), y) / k).backward()
        """,
    "scheduler_first": """
        for x, y in loader:
            scheduler.step()
            criterion(model(x), y).backward()
        """,
    "env_step_first": """
        for t in range(1000):
            obs, r, done, _ = env.step(policy(obs).sample())
            loss = -r * logp
            loss.backward()
            optimizer.step()
        """,
    "step_after_backward_in_inner_loop": """
        for epoch in range(3):
            for x, y in loader:
                criterion(model(x), y).backward()
                optimizer.step()
                optimizer.zero_grad()
        """,
    "step_after_per_head_loop": """
        for x, y in loader:
            for head in heads:
                crit(head(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
    "no_backward_in_loop": """
        for epoch in range(3):
            train_one_epoch(model, loader)
            swa_optimizer.step()
        """,
}


@pytest.mark.parametrize("name", POSITIVE)
def test_positive(name):
    src, expected = POSITIVE[name]
    assert findings(src, "TL009") == expected


@pytest.mark.parametrize("name", NEGATIVE)
def test_negative(name):
    assert findings(NEGATIVE[name], "TL009") == []


def test_fix_moves_step_after_backward():
    out = fixed(POSITIVE["script"][0], "TL009")
    assert out.endswith("    optimizer.zero_grad()\n    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n")
    assert fixed(out, "TL009") == out


def test_no_fix_for_scaler_step():
    src = POSITIVE["scaler_step_first"][0]
    import textwrap

    assert fixed(src, "TL009") == textwrap.dedent(src)


def test_message():
    """The full text of the finding, so a change of wording is seen here."""
    assert messages(POSITIVE["method_with_zero_grad_between"][0], "TL009") == [(
        4, 9,
        "`self.optimizer.step()` runs before `loss.backward()` in the same iteration: it applies stale "
        "(or zeroed) gradients; step after the backward",
    )]


def test_a_differentiable_optimizer_of_higher_takes_its_loss():
    """`higher.innerloop_ctx` yields a functional model and a differentiable optimizer whose `step(loss)` takes
    the loss's gradients itself: no `.grad` is read, so nothing is stale (meta-learning's reweighting step)."""
    src = """
        for x, y in loader:
            opt.zero_grad()
            with higher.innerloop_ctx(model, opt) as (meta_model, meta_opt):
                meta_loss = (eps * criterion(meta_model(x), y)).sum()
                meta_opt.step(meta_loss)
                val_loss = criterion(meta_model(xv), yv)
                eps_grads = torch.autograd.grad(val_loss, eps)[0]
            loss = (weights(eps_grads) * criterion(model(x), y)).sum()
            loss.backward()
            opt.step()
    """
    assert findings(src, "TL009") == []
    assert findings(src.replace("higher.innerloop_ctx(model, opt)", "make_pair(model, opt)"), "TL009") == [(6, 9)]
