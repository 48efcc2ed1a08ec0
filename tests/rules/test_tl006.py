"""TL006 zero_grad between backward and step (and per-micro-step zero_grad during accumulation)."""

import textwrap

import pytest

from tests.helpers import findings, fixed, messages

POSITIVE = {
    "per_step_method_clears_between_backward_and_step": (
        """
        class Agent:
            def __init__(self, net):
                self.net = net
                self.optimizer = torch.optim.Adam(net.parameters())

            def learn(self, batch):
                loss = self.net(batch).mean()
                loss.backward()
                self.optimizer.zero_grad()
                self.optimizer.step()
        """,
        [(10, 9)],
    ),
    # -- a clearing that covers everything the step applies ----------------------------------------------------
    "whole_model_cleared_between_backward_and_step_of_a_shared_optimizer": (
        """
        opt = torch.optim.Adam(gan.parameters())
        for batch in loader:
            fake_score, real_score = gan(batch)
            d_loss = bce(real_score, ones) + bce(fake_score, zeros)
            d_loss.backward()
            gan.zero_grad()
            opt.step()
        """,
        [(7, 5)],
    ),
    "shared_optimizer_cleared_by_its_own_zero_grad": (
        """
        for batch in loader:
            fake_score, real_score = gan(batch)
            d_loss = bce(real_score, ones) + bce(fake_score, zeros)
            d_loss.backward()
            gan.critic.zero_grad()
            opt.zero_grad()
            opt.step()
        """,
        [(7, 5)],
    ),
    "sub_module_cleared_when_the_loop_runs_only_that_sub_module": (
        """
        for batch in loader:
            out = gan.critic(batch)
            loss = bce(out, ones)
            loss.backward()
            gan.critic.zero_grad()
            opt.step()
        """,
        [(6, 5)],
    ),
    "optimizer_owns_only_the_cleared_network": (
        """
        opt_g = torch.optim.Adam(net_g.parameters())
        for z in noise:
            g_loss = -critic(net_g(z)).mean()
            g_loss.backward()
            net_g.zero_grad()
            opt_g.step()
        """,
        [(6, 5)],
    ),
    # -- the window cleared on its last micro-step, before that micro-step's backward ----------------------------
    "zero_grad_under_the_window_guard_before_the_backward": (
        """
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / k
            if (i + 1) % k == 0:
                optimizer.zero_grad()
            loss.backward()
            if (i + 1) % k == 0:
                optimizer.step()
        """,
        [(5, 9)],
    ),
    "prepared_optimizer_cleared_at_the_top_of_accumulate": (
        """
        for batch in loader:
            with accelerator.accumulate(model):
                optimizer.zero_grad()
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
        """,
        [(4, 9)],
    ),
    "lightning_manual_optimization_clears_before_the_step": (
        """
        import lightning as L

        class Net(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.automatic_optimization = False

            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                self.manual_backward(self.compute(batch) / 4)
                if (batch_idx + 1) % 4 == 0:
                    opt.zero_grad()
                    opt.step()
        """,
        [(13, 13)],
    ),
    "script": (
        """
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.zero_grad()
            optimizer.step()
        """,
        [(5, 5)],
    ),
    "model_zero_grad_between": (
        """
        def train(model, loader, opt):
            for x, y in loader:
                F.mse_loss(model(x), y).backward()
                model.zero_grad()
                opt.step()
        """,
        [(5, 9)],
    ),
    "accumulation_top_of_loop": (
        """
        for i, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            (criterion(model(x), y) / k).backward()
            if (i + 1) % k == 0:
                optimizer.step()
        """,
        [(3, 5)],
    ),
    "accumulation_after_backward_trainer": (
        """
        class Trainer:
            def fit(self):
                for step, batch in enumerate(self.loader):
                    loss = self.model(batch).loss / self.accum
                    loss.backward()
                    self.optimizer.zero_grad()
                    if step % self.accum == 0:
                        self.optimizer.step()
        """,
        [(7, 13)],
    ),
    "accelerate_model_zero_grad": (
        """
        for batch in loader:
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
                model.zero_grad()
        """,
        [(7, 9)],
    ),
    "scaler_between": (
        """
        for x, y in loader:
            scaler.scale(criterion(model(x), y)).backward()
            optimizer.zero_grad(set_to_none=True)
            scaler.step(optimizer)
            scaler.update()
        """,
        [(4, 5)],
    ),
    "nested_while": (
        """
        for epoch in range(3):
            it = 0
            while it < n:
                loss = loss_fn(net(xs[it]), ys[it])
                loss.backward()
                opt_g.zero_grad()
                opt_g.step()
                it += 1
        """,
        [(7, 9)],
    ),
    "gan_wrong_network_order": (
        """
        optimizerG = optim.Adam(netG.parameters())
        for real in loader:
            errG = bce(netD(netG(z)), ones)
            errG.backward()
            netG.zero_grad()
            optimizerG.step()
        """,
        [(6, 5)],
    ),
    # -- an accumulation window that gates the clipping but not the step -------------------------------------
    "step_and_clearing_outside_the_window_that_clips": (
        """
        seen = 0
        for batch in loader:
            loss = net(batch)
            loss.backward()
            seen += 1
            if seen % accum_steps == 0:
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                updates += 1
            if head_opt is not None:
                head_opt.step()
                head_opt.zero_grad()
        """,
        [(12, 9)],
    ),
    "step_outside_the_window_that_unscales": (
        """
        for i, batch in enumerate(loader):
            scaler.scale(net(batch)).backward()
            if (i + 1) % cfg.grad_accum == 0:
                scaler.unscale_(opt)
                clip(net.parameters())
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
        """,
        [(9, 5)],
    ),
    # -- a clearing after each micro-batch's backward, in an inner loop the step follows ------------------------
    "cleared_after_each_micro_batch_then_stepped_after_the_inner_loop": (
        """
        for batch, target in loader:
            for chunk in batch.split(8):
                err = crit(net(chunk), target)
                err.backward()
                opt.zero_grad()
            opt.step()
        """,
        [(6, 9)],
    ),
    # -- an inner micro-batch loop that clears before each backward, the step after it ---------------------------
    "inner_micro_batch_loop_clears_each_pass": (
        """
        for x, y in loader:
            for j in range(0, len(x), micro):
                optimizer.zero_grad()
                loss = criterion(model(x[j:j + micro]), y[j:j + micro])
                loss.backward()
            optimizer.step()
        """,
        [(4, 9)],
    ),
    "inner_loop_over_tasks_clears_the_model_each_pass": (
        """
        meta_opt = torch.optim.Adam(model.parameters())
        for batch in loader:
            for task in batch:
                model.zero_grad()
                meta_loss = model(task).mean()
                meta_loss.backward()
            meta_opt.step()
        """,
        [(5, 9)],
    ),
    "wrapped_module_of_a_ddp_cleared_between_backward_and_step": (
        """
        ddp = DDP(model)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
        for x, y in loader:
            loss = criterion(ddp(x), y)
            loss.backward()
            ddp.module.zero_grad()
            optimizer.step()
        """,
        [(7, 5)],
    ),
    # a private attribute is named like what it holds (`self._optimizer`), in a method run once per update
    "private_optimizer_attribute_cleared_before_its_step": (
        """
        class Approximation:
            def __init__(self, model, optimizer):
                self.model = model
                self._optimizer = optimizer

            def reinforce(self, loss):
                loss.backward()
                self._optimizer.zero_grad()
                self._optimizer.step()
        """,
        [(9, 9)],
    ),
}

NEGATIVE = {
    # the critic steps on all but every n-th iteration, each time on that iteration's own gradient: no window
    "step_skipped_every_nth_iteration_is_no_window": """
        for i, (x, y) in enumerate(loader):
            opt.zero_grad()
            d_opt.zero_grad()
            total = crit(net(x), y) + critic_term(disc, net(x), y, train_critic=i % n_critic != 0)
            total.backward()
            opt.step()
            if i % n_critic != 0:
                d_opt.step()
        """,
    "per_step_method_whose_second_backward_is_beyond_the_inlined_depth": """
        class Pair:
            def __init__(self, gen, disc):
                self.gen, self.disc = gen, disc
                self.opt_g = torch.optim.Adam(gen.parameters())
                self.opt_d = torch.optim.Adam(disc.parameters())

            def _disc_loss(self, real, fake):
                loss = self.disc(real).mean() - self.disc(fake.detach()).mean()
                loss.backward()
                return loss

            def _backward_d(self):
                self.loss_d = self._disc_loss(self.real, self.fake)

            def _backward_g(self):
                self.loss_g = -self.disc(self.fake).mean()
                self.loss_g.backward()

            def optimize(self):
                self.opt_g.zero_grad()
                self._backward_g()
                self.opt_g.step()
                self.opt_d.zero_grad()
                self._backward_d()
                self.opt_d.step()

            def train(self, real, noise):
                self.real, self.fake = real, self.gen(noise)
                self.optimize()
        """,
    "per_step_method_clears_the_other_network_between_its_steps": """
        class ActorCritic:
            def __init__(self, actor, critic):
                self.actor, self.critic = actor, critic
                self.a_opt = torch.optim.Adam(actor.parameters())
                self.c_opt = torch.optim.Adam(critic.parameters())

            def update(self, s, r):
                v = self.critic(s)
                (r - v).pow(2).mean().backward()
                self.a_opt.zero_grad()
                self.c_opt.step()
                (-(self.actor(s) * (r - v.detach())).mean()).backward()
                self.a_opt.step()
                self.c_opt.zero_grad()
        """,
    "per_step_method_with_a_closure_that_clears": """
        class Fitter:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.LBFGS(net.parameters())

            def step(self, x, y):
                def closure():
                    self.opt.zero_grad()
                    loss = F.mse_loss(self.net(x), y)
                    loss.backward()
                    return loss
                self.opt.step(closure)
        """,
    "per_step_method_clears_before_and_after": """
        class Agent:
            def __init__(self, net):
                self.net = net
                self.optimizer = torch.optim.Adam(net.parameters())

            def learn(self, batch):
                self.optimizer.zero_grad()
                self.net(batch).mean().backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
        """,
    "window_that_clips_and_steps": """
        for i, batch in enumerate(loader):
            net(batch).backward()
            if (i + 1) % accum_steps == 0:
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                opt.step()
                opt.zero_grad()
        """,
    "target_network_synced_every_k_steps": """
        for t, batch in enumerate(replay):
            opt.zero_grad()
            td_loss(q_net, target_net, batch).backward()
            torch.nn.utils.clip_grad_norm_(q_net.parameters(), 10.0)
            opt.step()
            if t % target_update_freq == 0:
                target_net.load_state_dict(q_net.state_dict())
        """,
    "clipping_every_k_steps_without_an_accumulation_setting": """
        for i, batch in enumerate(loader):
            net(batch).backward()
            if i % clip_every == 0:
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
        """,
    "step_under_a_condition_the_loop_changes": """
        for i, batch in enumerate(loader):
            net(batch).backward()
            if i % accum_steps == 0:
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            if ready(i):
                opt.step()
                opt.zero_grad()
        """,
    "window_in_an_outer_loop": """
        for epoch in range(epochs):
            if epoch % accum_epochs == 0:
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            for batch in loader:
                net(batch).backward()
                opt.step()
                opt.zero_grad()
        """,
    "accelerate_accumulates_itself": """
        for i, batch in enumerate(loader):
            with accelerator.accumulate(net):
                accelerator.backward(net(batch))
                if i % args.gradient_accumulation_steps == 0:
                    accelerator.clip_grad_norm_(net.parameters(), 1.0)
                opt.step()
                opt.zero_grad()
        """,
    # -- a sub-network cleared so that one shared optimizer's step leaves it out ----------------------------------
    "shared_optimizer_gan_excludes_one_sub_network_per_step": """
        for batch in loader:
            gan.critic.zero_grad()
            _, real_score, fake_score = gan(batch)
            d_loss = bce(real_score, ones) + bce(fake_score, zeros)
            d_loss.backward()
            gan.maker.zero_grad()
            opt.step()
            rebuilt, _, fake_score = gan(batch)
            g_loss = bce(fake_score, ones) + mse(rebuilt, batch)
            g_loss.backward()
            gan.critic.zero_grad()
            opt.step()
        """,
    "sub_module_of_the_optimizers_model_cleared_before_the_step": """
        opt = torch.optim.AdamW(gan.parameters(), lr=1e-3)
        for batch in loader:
            opt.zero_grad()
            loss = gan.critic(batch).mean() + gan.maker(batch).mean()
            loss.backward()
            gan.maker.zero_grad()
            opt.step()
        """,
    "self_sub_module_cleared_when_the_whole_module_runs": """
        class Trainer(nn.Module):
            def fit(self, loader):
                for batch in loader:
                    self.opt.zero_grad()
                    loss = self(batch).mean()
                    loss.backward()
                    self.maker.zero_grad()
                    self.opt.step()
        """,
    "zero_grad_under_the_window_guard_after_the_step": """
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / k
            loss.backward()
            if (i + 1) % k == 0:
                optimizer.step()
            if (i + 1) % k == 0:
                optimizer.zero_grad()
        """,
    "lightning_manual_optimization_clears_after_the_step": """
        import lightning as L

        class Net(L.LightningModule):
            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                self.manual_backward(self.compute(batch) / 4)
                if (batch_idx + 1) % 4 == 0:
                    opt.step()
                    opt.zero_grad()
        """,
    # zero_grad at the first micro-step of each window, counted by the loop's own variable
    "zero_grad_at_first_step_of_window": """
        for batch, micro in zip(loader, cycle(range(1, accum + 1))):
            if micro == 1:
                model.zero_grad(set_to_none=True)
            loss = criterion(model(batch))
            scaler.scale(loss).backward()
            if micro % accum == 0:
                scaler.step(optimizer)
                scaler.update()
        """,
    # the helper that steps and clears is called on exclusive branches: every iteration without accumulation,
    # every k-th with it; its zero_grad never runs in a pass where the guarded step waits
    "step_helper_on_exclusive_branches": """
        def train(model, loader, optimizer, accumulate, k):
            for i, batch in enumerate(loader):
                model(batch).backward()

                def take_step():
                    optimizer.step()
                    optimizer.zero_grad()

                if not accumulate:
                    take_step()
                else:
                    if (i + 1) % k == 0:
                        take_step()
        """,
    # zero_grad once per epoch (outside the batch loop), the step every `accumulate` batches: an unfinished
    # window is dropped at the epoch boundary, no micro-step loses its gradient (a YOLO-style loop)
    "epoch_start_zero_grad_with_inner_accumulation": """
        for epoch in range(epochs):
            optimizer.zero_grad()
            for i, (imgs, targets) in enumerate(loader):
                ni = i + nb * epoch
                loss = compute_loss(model(imgs), targets)
                scaler.scale(loss).backward()
                if ni % accumulate == 0:
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
        """,
    # two phases in sibling loops (a PPG-style policy phase, then an auxiliary phase that accumulates): the first
    # phase's zero_grad runs per iteration of its own loop, never between the second loop's micro-steps
    "plain_phase_then_accumulating_phase": """
        for update in range(updates):
            for x in loader:
                loss = model(x).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            for i, x in enumerate(aux_loader):
                (model(x).mean() / k).backward()
                if (i + 1) % k == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
    "top_of_loop": """
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        """,
    "after_step": """
        for x, y in loader:
            criterion(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
    "accumulation_guarded_zero": """
        for i, (x, y) in enumerate(loader):
            (criterion(model(x), y) / k).backward()
            if (i + 1) % k == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "accumulation_zero_at_window_start": """
        for i, (x, y) in enumerate(loader):
            if i % k == 0:
                optimizer.zero_grad()
            (criterion(model(x), y) / k).backward()
            if (i + 1) % k == 0:
                optimizer.step()
        """,
    "accelerate_optimizer_zero_grad": """
        for batch in loader:
            with accelerator.accumulate(model):
                accelerator.backward(model(**batch).loss)
                optimizer.step()
                optimizer.zero_grad()
        """,
    "dcgan_clears_other_network": """
        optimizerD = optim.Adam(netD.parameters())
        optimizerG = optim.Adam(netG.parameters())
        for real in loader:
            netD.zero_grad()
            errD = bce(netD(real), ones)
            errD.backward()
            optimizerD.step()
            netG.zero_grad()
            errG = bce(netD(netG(z)), ones)
            errG.backward()
            optimizerG.step()
        """,
    "gan_zero_other_optimizer": """
        for real in loader:
            d_loss.backward()
            opt_d.step()
            g_loss.backward()
            opt_d.zero_grad()
            opt_g.step()
            opt_g.zero_grad()
        """,
    "param_grad_none_top": """
        for x, y in loader:
            for p in model.parameters():
                p.grad = None
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
    "gan_generator_cleared_every_iteration_stepped_every_n_critic": """
        for i, (real, _) in enumerate(loader):
            optimizer_D.zero_grad()
            d_loss = -critic(real).mean() + critic(generator(noise())).mean()
            d_loss.backward()
            optimizer_D.step()
            optimizer_G.zero_grad()
            if i % n_critic == 0:
                g_loss = -critic(generator(noise())).mean()
                g_loss.backward()
                optimizer_G.step()
        """,
    "cleared_before_each_micro_batch_inside_the_inner_loop_that_steps": """
        for batch, target in loader:
            for chunk in batch.split(8):
                opt.zero_grad()
                err = crit(net(chunk), target)
                err.backward()
                opt.step()
        """,
    "inner_loop_steps_under_its_window_and_a_flush_step_follows": """
        for batch, target in loader:
            for j, chunk in enumerate(batch.split(8)):
                err = crit(net(chunk), target)
                err.backward()
                if (j + 1) % 4 == 0:
                    opt.step()
                    opt.zero_grad()
            opt.step()
            opt.zero_grad()
        """,
    "inner_loop_clears_another_optimizer": """
        for real in loader:
            for _ in range(5):
                d_err = crit(disc(real), ones) + crit(disc(gen(noise()).detach()), zeros)
                d_err.backward()
                opt_d.step()
                opt_d.zero_grad()
            g_err = crit(disc(gen(noise())), ones)
            g_err.backward()
            opt_g.step()
            opt_g.zero_grad()
        """,
    # -- inner loops that clear on purpose ------------------------------------------------------------------------
    "inner_loop_reads_grad_per_sample": """
        for x, y in loader:
            grads = []
            for xi, yi in zip(x, y):
                optimizer.zero_grad()
                criterion(model(xi), yi).backward()
                grads.append([p.grad.clone() for p in model.parameters()])
            for p, g in zip(model.parameters(), zip(*grads)):
                p.grad = torch.stack(g).mean(0)
            optimizer.step()
        """,
    "inner_retry_loop_left_by_break": """
        for x, y in loader:
            for attempt in range(3):
                try:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    break
                except RuntimeError:
                    x, y = x[: len(x) // 2], y[: len(y) // 2]
            optimizer.step()
        """,
    "inner_loop_clears_on_its_first_pass_only": """
        for x, y in loader:
            for j in range(0, len(x), micro):
                if j == 0:
                    optimizer.zero_grad()
                loss = criterion(model(x[j:j + micro]), y[j:j + micro])
                loss.backward()
            optimizer.step()
        """,
    "inner_loop_then_cleared_again_before_the_step": """
        for x, y in loader:
            for j in range(0, len(x), micro):
                optimizer.zero_grad()
                criterion(model(x[j:j + micro]), y[j:j + micro]).backward()
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        """,
    "critic_loop_steps_its_own_optimizer_inside": """
        for x, z in loader:
            for _ in range(n_critic):
                optD.zero_grad()
                d_loss = criterion(netD(x), netD(netG(z).detach()))
                d_loss.backward()
                optD.step()
            optG.zero_grad()
            g_loss = -netD(netG(z)).mean()
            g_loss.backward()
            optG.step()
        """,
    "critic_loop_clears_the_module_and_steps_its_optimizer_inside": """
        for img in loader:
            loss = seg_loss(model(img))
            loss.backward()
            for _ in range(args.drec):
                netD.zero_grad()
                netD(real).mean().backward(mone)
                netD(fake()).mean().backward(one)
                optD.step()
            optimizer.step()
            optimizer.zero_grad()
        """,
    "inner_while_loop_retries": """
        for x, y in loader:
            ok = False
            while not ok:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                ok = torch.isfinite(loss).item()
            optimizer.step()
        """,
    "module_attribute_of_a_model_not_a_wrapper_cleared_in_a_shared_optimizer": """
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
        for x, y in loader:
            loss = criterion(net(x), y)
            loss.backward()
            net.module.zero_grad()
            optimizer.step()
        """,
}


@pytest.mark.parametrize("name", POSITIVE)
def test_positive(name):
    src, expected = POSITIVE[name]
    assert findings(src, "TL006") == expected


@pytest.mark.parametrize("name", NEGATIVE)
def test_negative(name):
    assert findings(NEGATIVE[name], "TL006") == []


def test_fix_moves_after_step():
    out = fixed(POSITIVE["script"][0], "TL006")
    assert out.endswith("    loss.backward()\n    optimizer.step()\n    optimizer.zero_grad()\n")
    assert fixed(out, "TL006") == out


def test_fix_moves_into_accumulation_guard():
    out = fixed(POSITIVE["accumulation_top_of_loop"][0], "TL006")
    assert "        optimizer.step()\n        optimizer.zero_grad()\n" in out
    assert out.count("zero_grad") == 1


def test_fix_after_scaler_update():
    out = fixed(POSITIVE["scaler_between"][0], "TL006")
    assert out.endswith("    scaler.update()\n    optimizer.zero_grad(set_to_none=True)\n")


def test_fix_accelerate_uses_optimizer():
    out = fixed(POSITIVE["accelerate_model_zero_grad"][0], "TL006")
    assert "        optimizer.zero_grad()\n" in out and "model.zero_grad()" not in out


def test_message():
    """The full text of the finding, so a change of wording is seen here."""
    assert messages(POSITIVE["zero_grad_under_the_window_guard_before_the_backward"][0], "TL006") == [(
        5, 9,
        "`optimizer.zero_grad()` clears the gradients on the window's last iteration, before its "
        "backward, so `optimizer.step()` applies the last micro-batch's gradient only (the window's "
        "others are wiped): gradient accumulation is lost; move it after the step",
    )]


def test_message_of_a_step_outside_its_window():
    """The step outside the declared window: named with the window's gated event, and no fix offered."""
    src = POSITIVE["step_and_clearing_outside_the_window_that_clips"][0]
    assert messages(src, "TL006") == [(
        12, 9,
        "`head_opt.zero_grad()` runs on every iteration, and so does `head_opt.step()`, while the loop's "
        "accumulation window gates `torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)` only: each step "
        "applies one micro-batch and nothing accumulates; put the step and the zero_grad() under the window's "
        "condition",
    )]
    assert fixed(src, "TL006") == textwrap.dedent(src)


# A step function (run once per iteration of a loop elsewhere) whose window counts its calls; and accumulation
# declared only by dividing the loss, with no window holding the step.
WINDOW_POSITIVE = {
    "step_function_clears_every_call_and_steps_every_k": (
        """
        class Trainer:
            def run_iteration(self, itr, batch):
                loss = self.loss_fn(self.model(batch)) / self.accum
                self.optimizer.zero_grad()
                loss.backward()
                if (itr + 1) % self.accum == 0:
                    self.optimizer.step()
        """,
        [(5, 9)],
    ),
    "loss_divided_by_accumulation_steps_and_stepped_every_iteration": (
        """
        for step, batch in enumerate(loader):
            loss = criterion(model(batch), batch)
            if gradient_accumulation_steps > 1:
                loss /= gradient_accumulation_steps
            loss.backward()
            optimizer.step()
            model.zero_grad()
        """,
        [(8, 5)],
    ),
    "divided_in_the_backward_itself": (
        """
        for x, y in loader:
            optimizer.zero_grad()
            (criterion(model(x), y) / args.accum_iter).backward()
            optimizer.step()
        """,
        [(3, 5)],
    ),
}

WINDOW_NEGATIVE = {
    "step_function_clears_under_the_window": """
        class Trainer:
            def run_iteration(self, itr, batch):
                loss = self.loss_fn(self.model(batch)) / self.accum
                loss.backward()
                if (itr + 1) % self.accum == 0:
                    self.optimizer.step()
                    self.optimizer.zero_grad()
        """,
    "step_function_window_over_a_local_value": """
        def update(agent, batch):
            every = 4
            agent.optimizer.zero_grad()
            agent.loss(batch).backward()
            if len(batch) % every == 0:
                agent.optimizer.step()
        """,
    "divided_and_stepped_in_a_window": """
        for step, batch in enumerate(loader):
            loss = criterion(model(batch), batch) / gradient_accumulation_steps
            loss.backward()
            if (step + 1) % gradient_accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "divided_by_a_batch_size": """
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y) / x.size(0)
            loss.backward()
            optimizer.step()
        """,
}


@pytest.mark.parametrize("name", sorted(WINDOW_POSITIVE))
def test_window_positive(name):
    src, expected = WINDOW_POSITIVE[name]
    assert findings(src, "TL006") == expected


@pytest.mark.parametrize("name", sorted(WINDOW_NEGATIVE))
def test_window_negative(name):
    assert findings(WINDOW_NEGATIVE[name], "TL006") == []


def test_message_division_without_window():
    (_, _, message), = messages(WINDOW_POSITIVE["loss_divided_by_accumulation_steps_and_stepped_every_iteration"][0],
                                "TL006")
    assert "divided by `gradient_accumulation_steps`" in message and "nothing accumulates" in message


def test_division_with_an_inner_micro_batch_loop_is_a_window():
    src = """
        for i in range(num_batches):
            for _ in range(GRADIENT_ACCUMULATE_EVERY):
                loss = model(next(loader))
                (loss / GRADIENT_ACCUMULATE_EVERY).backward()
            optim.step()
            optim.zero_grad()
        """
    assert findings(src, "TL006") == []


def test_division_with_a_window_made_by_continue():
    src = """
        for i, batch in enumerate(loader):
            loss = criterion(model(batch), batch)
            loss /= args.update_freq
            loss.backward()
            if (i + 1) % args.update_freq != 0:
                continue
            optimizer.step()
            model.zero_grad(set_to_none=True)
        """
    assert findings(src, "TL006") == []


@pytest.mark.parametrize("passes, found", [("range(1)", []), ("range(4)", [(4, 9)])])
def test_an_inner_loop_of_one_pass_wipes_nothing(passes, found):
    """`for _ in range(1): optimizer.zero_grad(); loss.backward()`, then the step: one pass, no micro-batch before
    it whose gradients the clearing could wipe."""
    src = f"""
        for it in range(100000):
            for sub in {passes}:
                optimizer.zero_grad()
                loss = criterion(model(next_batch()), target)
                loss.backward()
            optimizer.step()
        """
    assert findings(src, "TL006") == found


_SKIP_BRANCH = """
    for x, y in loader:
        opt.zero_grad(set_to_none=True)
        scaler.scale(crit(net(x), y)).backward()
        scaler.unscale_(opt)
        norm = clip_grad_norm_(net.parameters(), limit)
        if norm > limit and skip_large:
            opt.zero_grad(set_to_none=True)
            scaler.step(opt)
            scaler.update()
            {leave}
        scaler.step(opt)
        scaler.update()
"""


def test_a_branch_that_skips_one_update_on_purpose():
    """Gradients too large: the branch drops them, keeps the scaler's bookkeeping and leaves before the regular
    step. Falling through to that step instead, the regular step would apply the cleared gradients."""
    assert findings(_SKIP_BRANCH.format(leave="continue"), "TL006") == []
    assert findings(_SKIP_BRANCH.format(leave="break"), "TL006") == []
    assert findings(_SKIP_BRANCH.format(leave="pass"), "TL006") == [(8, 9)]


_FIXED_WINDOW = """
    accumulation_steps = {k}
    for i, (x, y) in enumerate(loader):
        loss = crit(net(x), y)
        if accumulation_steps > 1:
            loss = loss / accumulation_steps
        loss.backward()
        if (i + 1) % accumulation_steps == 0:
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
"""


def test_a_window_of_one_iteration_written_into_the_script():
    """The window is a constant 1 of the script: every iteration clips and steps its own gradient, which is what
    the misplaced step does too. With any other constant the step ignores the window."""
    assert findings(_FIXED_WINDOW.format(k=1), "TL006") == []
    assert findings(_FIXED_WINDOW.format(k=4), "TL006") == [(11, 5)]


def test_a_clearing_under_the_branch_without_accumulation():
    """`if k == 1: zero_grad()` and `if k > 1: if (i + 1) % k == 0: step()` never both hold: the clearing serves
    the branch that steps every iteration. Under `k >= 1` it would also run in the accumulating branch."""
    src = """
    for idx, (x, y) in enumerate(loader):
        loss = crit(model(x), y) / cfg.ACCUM
        if cfg.ACCUM == 1:
            optimizer.zero_grad()
        loss.backward()
        if cfg.ACCUM > 1:
            if (idx + 1) % cfg.ACCUM == 0:
                optimizer.step()
                optimizer.zero_grad()
        else:
            optimizer.step()
    """
    assert findings(src, "TL006") == []
    assert findings(src.replace("cfg.ACCUM == 1:", "cfg.ACCUM >= 1:"), "TL006") == [(5, 9)]


HAND_WRITTEN_GRADIENT = """
import torch


def train(net, scale, loader, crit):
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    scale_opt = torch.optim.SGD([scale], lr=0.01)
    for x, y in loader:
        opt.zero_grad()
        loss = crit(net(x) * scale, y)
        loss.backward()
        opt.step()
        {first}
        {second}
        scale_opt.step()
"""


def test_a_gradient_written_by_hand_after_the_clearing_is_what_the_step_applies():
    src = HAND_WRITTEN_GRADIENT.format(first="scale_opt.zero_grad()", second="scale.grad = torch.randn_like(scale) * 0.01")
    assert findings(src, "TL006") == []


def test_a_gradient_written_by_hand_before_the_clearing_is_still_wiped():
    src = HAND_WRITTEN_GRADIENT.format(first="scale.grad = torch.randn_like(scale) * 0.01", second="scale_opt.zero_grad()")
    assert findings(src, "TL006") == [(14, 9)]


MONTE_CARLO_PASSES = """
def train(net, optimizer, loader, crit, passes=4):
    for x, y in loader:
        for _ in range(passes):
            {sample}
            net.zero_grad()
            loss = crit(net(x), y)
            loss.backward()
            {gather}
        optimizer.step()
"""


def test_each_passs_gradients_handed_to_the_optimizers_own_method_are_not_wiped():
    """A Bayesian optimizer samples weights, and gathers each Monte-Carlo pass's gradients into its own state
    (`aggregate_grads`) before the next pass clears them: its `step()` uses what it gathered."""
    src = MONTE_CARLO_PASSES.format(sample="optimizer.randomize_weights()", gather="optimizer.aggregate_grads(len(x))")
    assert findings(src, "TL006") == []


@pytest.mark.parametrize("sample, gather", [
    ("pass", "pass"),
    ("pass", "optimizer.state_dict()"),  # torch's own API reads no gradient
])
def test_each_passs_gradients_wiped_before_the_step_are_still_reported(sample, gather):
    assert findings(MONTE_CARLO_PASSES.format(sample=sample, gather=gather), "TL006") == [(6, 13)]


SCHEDULE = """
import torch


class Agent:
    def __init__(self, policy, critic, every):
        self.policy, self.critic = policy, critic
        self.opt_policy = torch.optim.Adam(policy.parameters())
        self.opt_critic = torch.optim.Adam(critic.parameters())
        self.updates = 0
        self.every = every

    def train(self, batches):
        for batch in batches:
            self.opt_policy.zero_grad()
            self.opt_critic.zero_grad()
            loss = self.policy(batch).mean() + self.critic(batch).mean()
            loss.backward()
            self.opt_critic.step()
            if self.updates % self.every == 0:
                self.opt_policy.step()
            {inside}
        {after}
"""


def test_a_schedule_fixed_for_the_whole_loop_is_not_an_accumulation_window():
    """`self.updates` advances after the loop: in one call every iteration steps the policy, or none does (it
    trains every `every`-th call); clearing it every iteration is what that schedule wants."""
    assert findings(SCHEDULE.format(inside="", after="self.updates += 1"), "TL006") == []


@pytest.mark.parametrize("inside, after", [
    ("self.updates += 1", ""),           # the counter advances inside the loop: a window of `every` iterations
    ("self.advance()", "\n    def advance(self):\n        self.updates += 1"),  # advanced by a method the loop calls
])
def test_a_window_counted_inside_the_loop_is_still_reported(inside, after):
    assert findings(SCHEDULE.format(inside=inside, after=after), "TL006") == [(15, 13)]
