"""TL010 GradScaler misuse."""

import textwrap

import pytest

from tests.helpers import findings, fixed, messages

POSITIVE = {
    "plain_step_after_a_scaled_loss_bound_to_a_name": (
        """
        for x, y in loader:
            with autocast():
                loss = criterion(model(x), y)
            scaled = scaler.scale(loss)
            scaled.backward()
            optimizer.step()
            scaler.update()
            optimizer.zero_grad()
        """,
        [(7, 5)],
    ),
    "direct_step": (
        """
        scaler = torch.cuda.amp.GradScaler()
        for x, y in loader:
            with torch.autocast("cuda"):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            optimizer.step()
            scaler.update()
            optimizer.zero_grad()
        """,
        [(7, 5)],
    ),
    "clip_before_unscale": (
        """
        for x, y in loader:
            scaler.scale(criterion(model(x), y)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
        """,
        [(4, 5)],
    ),
    "no_update": (
        """
        def train(model, loader, opt, scaler):
            for x, y in loader:
                scaler.scale(F.mse_loss(model(x), y)).backward()
                scaler.step(opt)
                opt.zero_grad()
        """,
        [(5, 9)],
    ),
    "trainer_direct_step": (
        """
        class Trainer:
            def fit(self):
                for batch in self.loader:
                    loss = self.model(batch).loss
                    self.scaler.scale(loss).backward()
                    self.optimizer.step()
                    self.scaler.update()
                    self.optimizer.zero_grad()
        """,
        [(7, 13)],
    ),
    "clip_value_before_unscale_nested": (
        """
        for epoch in range(3):
            for x, y in loader:
                amp_scaler.scale(crit(model(x), y)).backward()
                clip_grad_value_(model.parameters(), 0.5)
                amp_scaler.step(opt)
                amp_scaler.update()
                opt.zero_grad()
        """,
        [(5, 9)],
    ),
    "gradients_clamped_by_hand_in_a_loop_over_the_parameters": (
        """
        for x, y in loader:
            opt.zero_grad()
            scaler.scale(crit(net(x), y)).backward()
            for p in net.parameters():
                if p.grad is not None:
                    p.grad.data.clamp_(-1.0, 1.0)
            scaler.step(opt)
            scaler.update()
        """,
        [(7, 13)],
    ),
    "gradients_clamped_by_hand_in_a_helper_of_the_file": (
        """
        def clamp_grads(model, bound):
            for p in model.parameters():
                p.grad.clamp_(-bound, bound)

        for x, y in loader:
            opt.zero_grad()
            scaler.scale(crit(net(x), y)).backward()
            clamp_grads(net, 5.0)
            scaler.step(opt)
            scaler.update()
        """,
        [(4, 9)],
    ),
    # one step per call: the window's micro-batches in a loop of the function, the clip and the step after it
    "clip_after_a_micro_batch_loop_in_a_step_function": (
        """
        def train_step(model, batches, optimizer, scaler, accum):
            for _ in range(accum):
                x, y = next(batches)
                scaler.scale(crit(model(x), y) / accum).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
        """,
        [(6, 5)],
    ),
    "deprecated_clip_grad_norm_before_unscale": (
        """
        for x, y in loader:
            opt.zero_grad()
            scaler.scale(crit(net(x), y)).backward()
            torch.nn.utils.clip_grad_norm(net.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
        """,
        [(5, 5)],
    ),
    "accumulation_no_update": (
        """
        for i, (x, y) in enumerate(loader):
            scaler.scale(criterion(model(x), y) / k).backward()
            if (i + 1) % k == 0:
                scaler.step(optimizer)
                optimizer.zero_grad()
        """,
        [(5, 9)],
    ),
    "unscale_then_direct_step": (
        """
        for x, y in loader:
            scaler.scale(criterion(model(x), y)).backward()
            scaler.unscale_(optimizer)
            optimizer.step()
            scaler.update()
        """,
        [(5, 5)],
    ),
    "while_gan_direct": (
        """
        while it < n:
            scaler.scale(d_loss).backward()
            optimizerD.step()
            scaler.update()
            it += 1
        """,
        [(4, 5)],
    ),
    # A per-step method (no loop of its own) runs once per step of whatever loop calls it, in any file.
    "per_step_method_clips_before_unscale": (
        """
        class Stepper:
            def step(self, loss, global_step):
                self.grad_scaler.scale(loss).backward()
                if self.max_norm is not None:
                    torch.nn.utils.clip_grad_norm_(self.params, self.max_norm)
                for opt in self.opts:
                    self.grad_scaler.step(opt)
                self.grad_scaler.update()
        """,
        [(6, 13)],
    ),
    "per_step_function_direct_step": (
        """
        def update(net, batch, opt, amp_scaler):
            loss = net(batch).mean()
            amp_scaler.scale(loss).backward()
            opt.step()
            amp_scaler.update()
        """,
        [(5, 5)],
    ),
    "per_step_method_two_networks_each_clipped_scaled": (
        """
        class Agent:
            def learn(self, batch):
                self.pi_scaler.scale(self.pi_loss(batch)).backward()
                clip_grad_norm_(self.pi.parameters(), 10.0)
                self.pi_scaler.step(self.pi_opt)
                self.pi_scaler.update()
                self.v_scaler.scale(self.v_loss(batch)).backward()
                clip_grad_norm_(self.v.parameters(), 10.0)
                self.v_scaler.step(self.v_opt)
                self.v_scaler.update()
        """,
        [(5, 9), (9, 9)],
    ),
    # called in a loop of the same file: judged there and as a body, reported once
    "per_step_helper_called_in_a_loop_reported_once": (
        """
        def train_step(x, y):
            scaler.scale(criterion(model(x), y)).backward()
            clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()

        for x, y in loader:
            train_step(x, y)
        """,
        [(4, 5)],
    ),
    # the update skipped by a flag set after the unscale: the next unscale_ raises
    "update_skipped_by_a_flag_set_after_unscale": (
        """
        for i, batch in enumerate(loader):
            scaler.scale(net(batch).mean()).backward()
            scaler.unscale_(opt)
            skip = False
            norm = clip_grad_norm_(net.parameters(), 1.0)
            if norm > 10.0:
                skip = True
            if not skip:
                scaler.step(opt)
                scaler.update()
            opt.zero_grad()
        """,
        [(11, 9)],
    ),
    "update_under_a_test_of_the_norm_clipped_after_unscale": (
        """
        for batch in loader:
            scaler.scale(net(batch).mean()).backward()
            scaler.unscale_(opt)
            total = clip_grad_norm_(net.parameters(), 1.0)
            if torch.isfinite(total):
                scaler.step(opt)
                scaler.update()
        """,
        [(8, 9)],
    ),
    "plain_step_after_a_wrapper_handed_the_scaler": (
        """
        def run(opts, optimizer, scaler, loader):
            for batch in loader:
                scaler.scale(loss_of(batch)).backward()
                opts.step("critic", scaler=scaler)
                optimizer.step()
                scaler.update()
        """,
        [(6, 9)],
    ),
    "update_after_each_network": (
        """
        class SuperRes:
            def learn(self, lo, hi):
                fake = self.gen(lo)
                self.grad_scaler.scale(self.pix(fake, hi)).backward()
                self.grad_scaler.step(self.opt_gen)
                self.grad_scaler.update()
                self.grad_scaler.scale(self.critic_loss(fake.detach(), hi)).backward()
                self.grad_scaler.step(self.opt_critic)
                self.grad_scaler.update()
        """,
        [(7, 9)],
    ),
    "update_per_optimizer_in_a_helper": (
        """
        class Runner:
            def _one(self, batch, opt, scaler):
                scaler.scale(self.net.loss(batch, opt)).backward()
                scaler.step(opt)
                scaler.update()

            def fit(self):
                for batch in self.loader:
                    for k, opt in enumerate(self.opts):
                        scaler = self.grad_scaler
                        self._one(batch, opt, scaler)
                        opt.zero_grad()
        """,
        [(6, 9)],
    ),
    "update_per_optimizer_inline": (
        """
        for x, y in loader:
            for opt in (opt_a, opt_b):
                scaler.scale(crit(net(x), y)).backward()
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
        """,
        [(6, 9)],
    ),
    "scaler_step_after_a_backward_never_scaled": (
        """
        amp_scaler = torch.amp.GradScaler("cuda")
        for inp, tgt in batches:
            with torch.autocast("cuda"):
                err = crit(net(inp), tgt)
            opt.zero_grad()
            err.backward()
            amp_scaler.step(opt)
            amp_scaler.update()
        """,
        [(8, 5)],
    ),
    "update_only_on_periodic_iterations": (
        """
        def fit(net, batches, opt, crit, amp_scaler, cfg):
            for it, (inp, tgt) in enumerate(batches):
                with torch.autocast("cuda", enabled=cfg.fp16):
                    err = crit(net(inp), tgt)
                opt.zero_grad()
                amp_scaler.scale(err).backward()
                amp_scaler.step(opt)
                if it % 50 == 0 and cfg.fp16:
                    amp_scaler.update(amp_scaler.get_scale() * 2)
        """,
        [(8, 9)],
    ),
    "update_under_a_periodic_flag_computed_ahead": (
        """
        class Runner:
            def run(self, data):
                for n, batch in enumerate(data):
                    refresh = (n + 1) % self.every == 0
                    self.grad_scaler.scale(self.net(batch).sum()).backward()
                    self.grad_scaler.step(self.opt)
                    self.opt.zero_grad()
                    if refresh:
                        self.grad_scaler.update()
        """,
        [(7, 13)],
    ),
    "update_skipped_on_logging_iterations": (
        """
        for k, (a, b) in enumerate(pairs):
            grad_scaler.scale(mse(net(a), b)).backward()
            grad_scaler.step(sgd)
            sgd.zero_grad()
            if k % 20 == 0:
                print(k)
            else:
                grad_scaler.update()
        """,
        [(4, 5)],
    ),
    "helpers_each_updating_after_their_optimizer_called_with_arguments": (
        """
        def critic_update(scaler):
            scaler.step(opt_d)
            opt_d.zero_grad()
            scaler.update()

        def generator_update(scaler):
            scaler.step(opt_g)
            opt_g.zero_grad()
            scaler.update()

        for real in loader:
            scaler.scale(d_loss(real)).backward()
            critic_update(scaler)
            scaler.scale(g_loss(real)).backward()
            generator_update(scaler)
        """,
        [(5, 5)],
    ),
    "plain_step_after_the_scalers_step_in_a_helper": (
        """
        class Loop:
            def apply(self):
                self.grad_scaler.unscale_(self.opt)
                clip_grad_norm_(self.net.parameters(), 1.0)
                self.grad_scaler.step(self.opt)
                self.grad_scaler.update()

            def run(self, data):
                for x in data:
                    self.grad_scaler.scale(self.net(x).sum()).backward()
                    self.apply()
                    self.opt.step()
                    self.opt.zero_grad()
        """,
        [(13, 13)],
    ),
    "unscale_every_micro_step_of_a_window": (
        """
        for i, (x, y) in enumerate(loader):
            with autocast():
                loss = criterion(model(x), y) / accum
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            if (i + 1) % accum == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
        """,
        [(6, 5)],
    ),
    "unscale_twice_in_one_iteration": (
        """
        for x, y in loader:
            optimizer.zero_grad()
            with autocast():
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.unscale_(optimizer)
            scaler.step(optimizer)
            scaler.update()
        """,
        [(9, 5)],
    ),
    "update_every_micro_step_of_a_window": (
        """
        for i, (x, y) in enumerate(loader):
            with autocast():
                loss = criterion(model(x), y) / accum
            scaler.scale(loss).backward()
            if (i + 1) % accum == 0:
                scaler.step(optimizer)
                optimizer.zero_grad()
            scaler.update()
        """,
        [(9, 5)],
    ),
    "unscale_in_a_window_asserted_for_another_count": (
        """
        def train(model, loader, optimizer, scaler, accum):
            for step, batch in enumerate(loader):
                loss = model(batch) / accum
                scaler.scale(loss).backward()
                if model.use_amp:
                    assert accum >= 1
                    scaler.unscale_(optimizer)
                clip_grad_norm_(model.parameters(), 1.0)
                if (step + 1) % accum == 0:
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
        """,
        [(8, 13)],
    ),
}

NEGATIVE = {
    "gradients_clamped_by_hand_after_unscale": """
        for x, y in loader:
            opt.zero_grad()
            scaler.scale(crit(net(x), y)).backward()
            scaler.unscale_(opt)
            for p in net.parameters():
                p.grad.data.clamp_(-1.0, 1.0)
            scaler.step(opt)
            scaler.update()
        """,
    "a_clamp_of_a_tensor_that_is_no_gradient": """
        for x, y in loader:
            opt.zero_grad()
            scaler.scale(crit(net(x), y)).backward()
            for p in net.parameters():
                p.data.clamp_(-0.01, 0.01)
            scaler.step(opt)
            scaler.update()
        """,
    "second_update_sets_the_scale_by_hand": """
        scaler = torch.cuda.amp.GradScaler()
        for i, (x, y) in enumerate(loader):
            with torch.autocast("cuda"):
                loss = crit(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            if i % 100 == 0:
                current = scaler.get_scale()
                if current < 1.0:
                    scaler.update(current * 2.0)
        """,
    "two_training_steps_in_one_pass": """
        class Adapt:
            def one_step(self, batch):
                self.grad_scaler.scale(self.net(batch).mean()).backward()
                self.grad_scaler.step(self.opt)
                self.grad_scaler.update()
                self.opt.zero_grad()

            def fit(self):
                for src, tgt in self.loader:
                    self.one_step(src)
                    self.one_step(tgt)
        """,
    "one_update_after_both_networks": """
        for lo, hi in loader:
            fake = gen(lo)
            scaler.scale(pix(fake, hi)).backward()
            scaler.step(opt_gen)
            scaler.scale(critic_loss(fake.detach(), hi)).backward()
            scaler.step(opt_critic)
            scaler.update()
        """,
    "a_scaler_per_network": """
        for lo, hi in loader:
            fake = gen(lo)
            scaler_g.scale(pix(fake, hi)).backward()
            scaler_g.step(opt_gen)
            scaler_g.update()
            scaler_d.scale(critic_loss(fake.detach(), hi)).backward()
            scaler_d.step(opt_critic)
            scaler_d.update()
        """,
    "updates_on_exclusive_arms": """
        for x, y in loader:
            scaler.scale(crit(net(x), y)).backward()
            if use_a:
                scaler.step(opt_a)
                scaler.update()
            else:
                scaler.step(opt_b)
                scaler.update()
        """,
    "one_update_after_the_optimizer_loop": """
        for x, y in loader:
            scaler.scale(crit(net(x), y)).backward()
            for opt in opts:
                scaler.step(opt)
            scaler.update()
        """,
    "a_scaler_per_optimizer_in_the_loop": """
        for x, y in loader:
            for k, opt in enumerate(opts):
                scaler = scalers[k]
                scaler.scale(crit(net(x), y)).backward()
                scaler.step(opt)
                scaler.update()
            for opt, scaler in zip(opts, scalers):
                scaler.scale(crit(net(x), y)).backward()
                scaler.step(opt)
                scaler.update()
        """,
    "micro_steps_each_updated": """
        for batch in loader:
            for part in batch.chunk(4):
                scaler.scale(crit(net(part))).backward()
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
        """,
    "two_runs_one_after_the_other": """
        def fit(net, opt, loader, scaler):
            for x in loader:
                scaler.scale(net(x).sum()).backward()
                scaler.step(opt)
                scaler.update()
            for x in loader:
                scaler.scale(net(x).sum()).backward()
                scaler.step(opt)
                scaler.update()
        """,
    "update_after_a_skipped_step": """
        for batch in loader:
            scaler.scale(net(batch).mean()).backward()
            scaler.unscale_(opt)
            total = clip_grad_norm_(net.parameters(), 1.0)
            if torch.isfinite(total):
                scaler.step(opt)
            scaler.update()
        """,
    # the same window test before the unscale and again before the update: nothing new is decided
    "window_tested_twice": """
        for i, batch in enumerate(loader):
            scaler.scale(net(batch).mean() / k).backward()
            if (i + 1) % k == 0:
                scaler.unscale_(opt)
                clip_grad_norm_(net.parameters(), 1.0)
            if (i + 1) % k == 0:
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
        """,
    # a flag decided before the unscale: the unscale runs under it too
    "flag_decided_before_the_unscale": """
        for i, batch in enumerate(loader):
            scaler.scale(net(batch).mean()).backward()
            do_step = (i + 1) % k == 0
            if do_step:
                scaler.unscale_(opt)
                clip_grad_norm_(net.parameters(), 1.0)
            if do_step:
                scaler.step(opt)
                scaler.update()
        """,
    "per_step_method_recipe": """
        class Stepper:
            def step(self, loss):
                self.grad_scaler.scale(loss).backward()
                self.grad_scaler.unscale_(self.opt)
                torch.nn.utils.clip_grad_norm_(self.params, 1.0)
                self.grad_scaler.step(self.opt)
                self.grad_scaler.update()
        """,
    # the caller updates the scale once the per-step function has returned
    "per_step_function_leaves_update_to_caller": """
        def optimize(loss, opt, scaler):
            scaler.scale(loss).backward()
            scaler.step(opt)

        def fit(loader, opt, scaler):
            for batch in loader:
                optimize(model(batch).mean(), opt, scaler)
                scaler.update()
        """,
    # a backward helper steps nothing: the caller unscales before clipping
    "scaled_backward_helper_without_step": """
        class Engine:
            def backward(self, loss):
                self.scaler.scale(loss).backward()

            def fit(self):
                for batch in self.loader:
                    self.backward(self.model(batch).mean())
                    self.scaler.unscale_(self.opt)
                    clip_grad_norm_(self.model.parameters(), 1.0)
                    self.scaler.step(self.opt)
                    self.scaler.update()
        """,
    "per_step_function_plain_arm_exclusive": """
        def update(net, loss, opt, scaler, amp):
            if amp:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                clip_grad_norm_(net.parameters(), 1.0)
                opt.step()
        """,
    # the direct step runs only when the scaled backward (nested ifs in a helper) did not: `a and b` vs a, b
    "scaled_backward_and_plain_step_on_exclusive_compound_guards": """
        def train_iteration(model, batch, scaler, args):
            loss = model(batch)
            if args.fp16:
                if args.amp == "pytorch":
                    scaler.scale(loss).backward()
            else:
                loss.backward()

        for batch in loader:
            train_iteration(model, batch, scaler, args)
            if args.fp16 and args.amp == "pytorch":
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            optimizer.zero_grad()
        """,
    "recipe": """
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """,
    "no_scaler": """
        for x, y in loader:
            criterion(model(x), y).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
        """,
    "accelerator_clip": """
        for batch in loader:
            scaler.scale(model(batch).loss).backward()
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        """,
    "two_optimizers_one_update": """
        for real in loader:
            scaler.scale(d_loss).backward()
            scaler.step(optimizerD)
            scaler.scale(g_loss).backward()
            scaler.step(optimizerG)
            scaler.update()
        """,
    "update_in_helper": """
        class T:
            def finish(self):
                self.scaler.step(self.optimizer)
                self.scaler.update()

            def fit(self):
                for b in self.loader:
                    self.scaler.scale(self.loss(b)).backward()
                    self.finish()
        """,
    "accumulation_recipe": """
        for i, (x, y) in enumerate(loader):
            scaler.scale(criterion(model(x), y) / k).backward()
            if (i + 1) % k == 0:
                scaler.unscale_(optimizer)
                clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
        """,
    "step_before_scaled_backward_other_opt": """
        for x, y in loader:
            aux_loss.backward()
            aux_opt.step()
            scaler.scale(main_loss).backward()
            scaler.step(main_opt)
            scaler.update()
        """,
    "clip_without_scaler": """
        for x in loader:
            loss.backward()
            clip_grad_norm_(params, 1.0)
            opt.step()
        """,
    "optional_amp_branches": """
        for x, y in loader:
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            if use_amp:
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
        """,
    "amp_and_plain_training_functions_run_one_after_the_other": """
        def train_amp(model, loader, optimizer, scaler):
            for x, y in loader:
                scaler.scale(criterion(model(x), y)).backward()
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()

        def train_plain(model, loader, optimizer):
            for x, y in loader:
                criterion(model(x), y).backward()
                optimizer.step()
                optimizer.zero_grad()

        for level in ["O1", "O2"]:
            train_amp(model, loader, optimizer, scaler)
            train_plain(model, loader, optimizer)
        """,
    "optional_scaler_through_a_backward_helper": """
        def backward(total_loss, scaler):
            if scaler is not None:
                scaler.scale(total_loss).backward()
            else:
                total_loss.backward()

        def train_one_epoch(model, loader, optimizer, scaler, args):
            for images, texts in loader:
                total_loss = model(images, texts).mean()
                backward(total_loss, scaler)
                if scaler is not None:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
                    optimizer.step()
                optimizer.zero_grad()
        """,
    "wrapper_step_handed_the_scaler": """
        class Fitter:
            def run(self, scaler):
                for batch in self.loader:
                    self.optimizer.zero_grad()
                    scaler.scale(self.critic_loss(batch)).backward()
                    self.optimizer.step("critic", scaler=scaler)
                    self.optimizer.step("actor", scaler)
    """,
    "scaler_built_disabled_steps_plainly": """
        amp_scaler = torch.cuda.amp.GradScaler(enabled=False)
        for inp, tgt in batches:
            err = crit(net(inp), tgt)
            opt.zero_grad()
            err.backward()
            amp_scaler.step(opt)
            amp_scaler.update()
        """,
    "loss_scaled_into_a_name_then_back_propagated": """
        amp_scaler = torch.cuda.amp.GradScaler()
        for inp, tgt in batches:
            with torch.autocast("cuda"):
                err = crit(net(inp), tgt)
            big = amp_scaler.scale(err)
            opt.zero_grad()
            big.backward()
            amp_scaler.step(opt)
            amp_scaler.update()
        """,
    "scaler_handed_in_and_not_built_here": """
        def fit(net, batches, opt, crit, amp_scaler):
            for inp, tgt in batches:
                err = crit(net(inp), tgt)
                opt.zero_grad()
                err.backward()
                amp_scaler.step(opt)
                amp_scaler.update()
        """,
    "update_under_the_same_window_test_as_the_step": """
        for i, (x, y) in enumerate(loader):
            scaler.scale(crit(model(x), y) / accum).backward()
            if (i + 1) % accum == 0:
                scaler.step(opt)
                opt.zero_grad()
            if (i + 1) % accum == 0:
                scaler.update()
        """,
    "update_under_a_flag_fixed_for_the_loop": """
        for x, y in loader:
            if use_amp:
                scaler.scale(crit(model(x), y)).backward()
                scaler.step(opt)
            else:
                crit(model(x), y).backward()
                opt.step()
            if use_amp:
                scaler.update()
            opt.zero_grad()
        """,
    "step_every_iteration_update_under_a_fixed_flag": """
        for x, y in loader:
            scaler.scale(crit(model(x), y)).backward()
            scaler.step(opt)
            if args.amp:
                scaler.update()
            opt.zero_grad()
        """,
    "update_in_a_helper_called_every_iteration": """
        def finish(grad_scaler, o):
            grad_scaler.update()
            o.zero_grad()

        for x, y in loader:
            scaler.scale(crit(model(x), y)).backward()
            scaler.step(opt)
            finish(scaler, opt)
        """,
    "update_every_step_and_a_periodic_scale_set": """
        for it, (x, y) in enumerate(loader):
            scaler.scale(crit(model(x), y)).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            if it % 100 == 0 and use_fp16:
                cur = scaler.get_scale()
                if cur < 8.0:
                    scaler.update(cur * 2.0)
        """,
    "plain_step_only_when_the_scaler_is_absent_in_another_method": """
        class Fitter:
            def back(self, loss):
                if self.grad_scaler is None:
                    loss.backward()
                    return
                self.grad_scaler.scale(loss).backward()

            def apply(self):
                if self.grad_scaler is None:
                    self.opt.step()
                    return
                self.grad_scaler.step(self.opt)
                self.grad_scaler.update()

            def fit(self, data):
                for x in data:
                    self.back(self.net(x).mean())
                    self.apply()
                    self.opt.zero_grad()
        """,
    "plain_step_in_the_else_of_a_scaler_test": """
        for x in data:
            loss = net(x).mean()
            if grad_scaler is not None:
                grad_scaler.scale(loss).backward()
            else:
                loss.backward()
            if grad_scaler is not None:
                grad_scaler.step(opt)
                grad_scaler.update()
            else:
                opt.step()
            opt.zero_grad()
        """,
    "unscale_under_the_window_tested_twice": """
        for i, (x, y) in enumerate(loader):
            with autocast():
                loss = criterion(model(x), y) / accum
            scaler.scale(loss).backward()
            if (i + 1) % accum == 0:
                scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if (i + 1) % accum == 0:
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
        """,
    "unscale_each_optimizer_once": """
        for x, z in loader:
            with autocast():
                d_loss = criterion(netD(x), netD(netG(z).detach()))
                g_loss = -netD(netG(z)).mean()
            scaler.scale(d_loss).backward()
            scaler.unscale_(opt_d)
            scaler.step(opt_d)
            scaler.scale(g_loss).backward()
            scaler.unscale_(opt_g)
            scaler.step(opt_g)
            scaler.update()
            opt_d.zero_grad()
            opt_g.zero_grad()
        """,
    "unscale_in_the_window_with_its_update": """
        for i, (x, y) in enumerate(loader):
            with autocast():
                loss = criterion(model(x), y) / accum
            scaler.scale(loss).backward()
            if (i + 1) % accum == 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
        """,
    "update_with_the_step_of_every_iteration_and_a_periodic_second_step": """
        for i, (x, z) in enumerate(loader):
            with autocast():
                d_loss = criterion(netD(x), netD(netG(z).detach()))
            scaler.scale(d_loss).backward()
            scaler.step(opt_d)
            opt_d.zero_grad()
            if i % n_critic == 0:
                with autocast():
                    g_loss = -netD(netG(z)).mean()
                scaler.scale(g_loss).backward()
                scaler.step(opt_g)
                opt_g.zero_grad()
            scaler.update()
        """,
    "plain_step_after_a_name_bound_to_a_scaled_loss_and_to_a_plain_one": """
        for x, y in loader:
            with autocast():
                loss = criterion(model(x), y)
            if use_amp:
                out = scaler.scale(loss)
            else:
                out = loss
            out.backward()
            if not use_amp:
                optimizer.step()
            optimizer.zero_grad()
        """,
    "plain_step_of_a_loss_whose_name_another_function_binds_to_a_scaled_loss": """
        def train_plain(model, loader, optimizer, criterion):
            for x, y in loader:
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

        def train_amp(model, loader, optimizer, criterion, scaler):
            for x, y in loader:
                with autocast():
                    loss = criterion(model(x), y)
                loss = scaler.scale(loss)
                optimizer.zero_grad()
                loss.backward()
                scaler.step(optimizer)
                scaler.update()
        """,
    # clipping after `scaler.step(opt)`: the step has unscaled the gradients already (a clip there is too late to
    # matter, but it does not see scaled gradients)
    "clip_after_the_scaler_step": (
        """
        for x, y in loader:
            optimizer.zero_grad()
            scaler.scale(criterion(model(x), y)).backward()
            scaler.step(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.update()
        """
    ),
    "unscale_after_asserting_a_window_of_one": """
        def train(model, loader, optimizer, scaler, accum):
            for step, batch in enumerate(loader):
                loss = model(batch) / accum
                scaler.scale(loss).backward()
                if model.use_amp:
                    assert accum == 1
                    scaler.unscale_(optimizer)
                clip_grad_norm_(model.parameters(), 1.0)
                if (step + 1) % accum == 0:
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
        """,
}


@pytest.mark.parametrize("name", POSITIVE)
def test_positive(name):
    src, expected = POSITIVE[name]
    assert findings(src, "TL010") == expected


@pytest.mark.parametrize("name", NEGATIVE)
def test_negative(name):
    assert findings(NEGATIVE[name], "TL010") == []


def test_fix_scaler_step():
    out = fixed(POSITIVE["direct_step"][0], "TL010")
    assert "    scaler.step(optimizer)\n    scaler.update()\n" in out
    assert fixed(out, "TL010") == out


def test_fix_unscale_before_clip():
    out = fixed(POSITIVE["clip_before_unscale"][0], "TL010")
    assert "    scaler.unscale_(optimizer)\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n" in out


def test_fix_insert_update():
    out = fixed(POSITIVE["accumulation_no_update"][0], "TL010")
    assert "        scaler.step(optimizer)\n        scaler.update()\n        optimizer.zero_grad()\n" in out


def test_message_direct_step():
    """The full text of the finding, so a change of wording is seen here."""
    assert messages(POSITIVE["direct_step"][0], "TL010") == [(
        7, 5,
        "`optimizer.step()` after `scaler.scale(...).backward()` applies gradients still multiplied by "
        "the loss scale and skips the inf/nan check; call `scaler.step(optimizer)`",
    )]


def test_message_clip_before_unscale():
    """The full text of the finding, so a change of wording is seen here."""
    assert messages(POSITIVE["clip_before_unscale"][0], "TL010") == [(
        4, 5,
        "`torch.nn.utils.clip_grad_norm_` clips gradients still multiplied by the loss scale: call "
        "`scaler.unscale_(optimizer)` before it",
    )]


def test_message_no_update():
    """The full text of the finding, so a change of wording is seen here."""
    assert messages(POSITIVE["no_update"][0], "TL010") == [(
        5, 9,
        "`scaler.step(opt)` without `scaler.update()` in the iteration: the loss scale never adapts, so "
        "overflowing steps keep being skipped; call `scaler.update()` after the step",
    )]


def test_message_names_the_scaler_of_the_backward_before_the_clip():
    """Two networks, each with its own GradScaler: each clip names the scaler that scaled its gradients."""
    got = messages(POSITIVE["per_step_method_two_networks_each_clipped_scaled"][0], "TL010")
    assert ["self.pi_scaler.unscale_(self.pi_opt)" in m for _, _, m in got] == [True, False]
    assert "self.v_scaler.unscale_(self.v_opt)" in got[1][2]


def test_no_fix_naming_an_optimizer_bound_by_a_later_loop():
    import textwrap
    src = POSITIVE["per_step_method_clips_before_unscale"][0]
    assert fixed(src, "TL010") == textwrap.dedent(src)


def test_message_update_only_on_periodic_iterations():
    """The full text of the finding, so a change of wording is seen here."""
    assert messages(POSITIVE["update_only_on_periodic_iterations"][0], "TL010") == [(
        8, 9,
        "`amp_scaler.step(opt)` runs on iterations that skip `amp_scaler.update(amp_scaler.get_scale() * 2)` (only "
        "when `it % 50 == 0 and cfg.fp16` holds): GradScaler needs an update after every step, so the next step raises "
        "'step() has already been called since the last update()'; call `amp_scaler.update()` after every step",
    )]


def test_message_plain_step_after_the_scalers_step():
    """The gradients were unscaled by the scaler's step: the second step is what is wrong, and no fix is offered
    (a second `scaler.step` in the iteration raises)."""
    src = POSITIVE["plain_step_after_the_scalers_step_in_a_helper"][0]
    assert messages(src, "TL010") == [(
        13, 13,
        "`self.opt.step()` after `self.grad_scaler.step(self.opt)` steps `self.opt` a second time in the iteration, "
        "bypassing the scaler's inf/nan check: a step the scaler skipped for inf/nan gradients is taken anyway; "
        "remove it",
    )]
    import textwrap
    assert fixed(src, "TL010") == textwrap.dedent(src)


# 7. A GradScaler built again for each iteration, or for each call of an epoch function.
REBUILT_POSITIVE = {
    "built_in_the_iteration_that_steps_with_it": (
        """
        for x, y in loader:
            scaler = torch.cuda.amp.GradScaler()
            optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        """,
        [(3, 14)],
    ),
    "built_by_an_epoch_function_that_a_loop_calls_with_one_optimizer": (
        """
        def train_epoch(loader, model, optimizer):
            scaler = GradScaler("cuda", enabled=True)
            for x, y in loader:
                optimizer.zero_grad()
                with torch.autocast("cuda"):
                    loss = criterion(model(x), y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()

        def main(model, loader):
            optimizer = torch.optim.AdamW(model.parameters())
            for epoch in range(10):
                train_epoch(loader, model, optimizer=optimizer)
        """,
        [(3, 14)],
    ),
}

REBUILT_NEGATIVE = {
    "built_once_before_the_loop": """
        scaler = torch.cuda.amp.GradScaler()
        for x, y in loader:
            optimizer.zero_grad()
            scaler.scale(criterion(model(x), y)).backward()
            scaler.step(optimizer)
            scaler.update()
        """,
    "built_lazily_in_the_loop": """
        scaler = None
        for x, y in loader:
            if scaler is None:
                scaler = torch.cuda.amp.GradScaler()
            optimizer.zero_grad()
            scaler.scale(criterion(model(x), y)).backward()
            scaler.step(optimizer)
            scaler.update()
        """,
    "a_run_per_fold_with_its_own_optimizer": """
        def train(loader, model, optimizer):
            scaler = GradScaler()
            for x, y in loader:
                optimizer.zero_grad()
                scaler.scale(criterion(model(x), y)).backward()
                scaler.step(optimizer)
                scaler.update()

        def cross_validate(folds):
            for loader in folds:
                model = Net()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                train(loader, model, optimizer)
        """,
    "an_epoch_function_called_once": """
        def train(loader, model, optimizer):
            scaler = GradScaler()
            for x, y in loader:
                optimizer.zero_grad()
                scaler.scale(criterion(model(x), y)).backward()
                scaler.step(optimizer)
                scaler.update()

        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        train(loader, model, optimizer)
        """,
    "a_disabled_scaler": """
        for x, y in loader:
            scaler = torch.cuda.amp.GradScaler(enabled=False)
            optimizer.zero_grad()
            scaler.scale(criterion(model(x), y)).backward()
            scaler.step(optimizer)
            scaler.update()
        """,
}


@pytest.mark.parametrize("name", sorted(REBUILT_POSITIVE))
def test_rebuilt_scaler_positive(name):
    src, expected = REBUILT_POSITIVE[name]
    assert findings(src, "TL010") == expected


@pytest.mark.parametrize("name", sorted(REBUILT_NEGATIVE))
def test_rebuilt_scaler_negative(name):
    assert findings(REBUILT_NEGATIVE[name], "TL010") == []


def test_message_rebuilt_scaler_names_the_epoch_loop():
    src, _ = REBUILT_POSITIVE["built_by_an_epoch_function_that_a_loop_calls_with_one_optimizer"]
    (_, _, message), = messages(src, "TL010")
    assert "each call of `train_epoch`" in message and "a loop of `main`" in message and "65536" in message


ACCUMULATE_CLIP = """
    for batch in loader:
        with accelerator.accumulate(model):
            loss = model(batch)
            accelerator.backward(loss)
            {clip}
            optimizer.step()
            optimizer.zero_grad()
"""


def test_accelerate_clip_on_every_micro_step():
    src = ACCUMULATE_CLIP.format(clip="accelerator.clip_grad_norm_(model.parameters(), 1.0)")
    assert findings(src, "TL010") == [(6, 9)]


def test_accelerate_clip_when_gradients_sync():
    src = ACCUMULATE_CLIP.format(
        clip="if accelerator.sync_gradients:\n                accelerator.clip_grad_norm_(model.parameters(), 1.0)")
    assert findings(src, "TL010") == []


def test_accelerate_clip_without_accumulation():
    src = ACCUMULATE_CLIP.format(clip="accelerator.clip_grad_norm_(model.parameters(), 1.0)").replace(
        "with accelerator.accumulate(model):", "if True:")
    assert findings(src, "TL010") == []


_EPOCH_FUNCTION = """
        from torch.cuda.amp import GradScaler, autocast
        {opt_outside}

        def train_epoch(loader):
            scaler = GradScaler()
            for x, y in loader:
                with autocast():
                    loss = criterion(model(x), y)
                opt.zero_grad()
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()

        for epoch in range(10):
            {opt_inside}
            train_epoch(loader)
        """


def test_rebuilt_scaler_in_an_epoch_function_stepping_a_module_optimizer():
    src = _EPOCH_FUNCTION.format(opt_outside="opt = torch.optim.SGD(model.parameters(), lr=0.1)", opt_inside="pass")
    assert findings(src, "TL010") == [(6, 14)]


def test_rebuilt_scaler_in_an_epoch_function_whose_optimizer_the_loop_builds_again():
    """Each run of the loop builds its own optimizer (a fold, a restart): a new scaler for a new run."""
    src = _EPOCH_FUNCTION.format(opt_outside="pass", opt_inside="opt = torch.optim.SGD(model.parameters(), lr=0.1)")
    assert findings(src, "TL010") == []


def test_rebuilt_scaler_in_an_epoch_method_stepping_the_trainers_optimizer():
    src = """
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

            def train_epoch(self, loader):
                scaler = torch.cuda.amp.GradScaler()
                for x, y in loader:
                    with torch.cuda.amp.autocast():
                        loss = self.model(x, y)
                    self.optimizer.zero_grad()
                    scaler.scale(loss).backward()
                    scaler.step(self.optimizer)
                    scaler.update()

            def fit(self, loader, epochs):
                for epoch in range(epochs):
                    self.train_epoch(loader)
        """
    assert findings(src, "TL010") == [(8, 18)]


def test_no_unscale_inserted_where_the_scaler_may_be_none():
    """The scaled backward runs only `if scaler:`: an unconditional `scaler.unscale_(...)` would raise on the
    plain path, so the clip is reported without a fix."""
    src = """
        for x, y in loader:
            loss = crit(net(x), y)
            if scaler:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            if scaler:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            opt.zero_grad()
        """
    assert findings(src, "TL010") == [(8, 5)]
    assert fixed(src, "TL010") == textwrap.dedent(src)


PER_OPTIMIZER = """
    for x in loader:
        scaler.scale(loss_of(model, x)).backward()
        for o in optimizers.values():
            if args.distributed:
                o.synchronize()
                {first}
            else:
                scaler.step(o)
        scaler.update()
"""


def test_a_loop_stepping_each_optimizer_steps_before_the_update():
    """A loop over the optimizers that steps the one of each pass, on both branches, has stepped when the update
    runs: a run's collection of optimizers is never empty. A pass that may not step leaves the update alone."""
    assert findings(PER_OPTIMIZER.format(first="scaler.step(o)"), "TL010") == []
    assert findings(PER_OPTIMIZER.format(first="pass"), "TL010") == [(10, 5)]
    # the same with the steps under a pass's condition of its own: some pass may step, none must
    head = "        for o in optimizers.values():\n"
    skipping = PER_OPTIMIZER.format(first="scaler.step(o)").replace(
        head, head + "            if o.frozen:\n                continue\n")
    assert findings(skipping, "TL010") == [(12, 5)]


_REBUILT_UNDER_A_SETTING = """
    for step, batch in enumerate(loader):
        loss = policy_loss(batch) / accum
        if cfg.fp16:
            scaler = GradScaler(enabled=True)
            scaler.scale(loss).backward()
        else:
            loss.backward()
        if (step + 1) % accum == 0:
            if cfg.fp16:
                scaler.unscale_(optimizer)
            norm = clip_grad_norm_(policy.parameters(), 1.0)
            if not torch.isfinite(norm):
                optimizer.zero_grad()
            elif cfg.fp16:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
"""


def test_a_scaler_built_again_under_a_setting_fixed_for_the_loop():
    """Built in every iteration under `if cfg.fp16:` (the same on every pass): the scale learned is dropped each
    time. That fresh scaler holds no unscaled state into the next iteration, so the update skipped after a
    non-finite norm is no second `unscale_` of one scaler."""
    assert findings(_REBUILT_UNDER_A_SETTING, "TL010") == [(5, 18)]
    once = "\n    scaler = GradScaler(enabled=True)" + _REBUILT_UNDER_A_SETTING.replace(
        "            scaler = GradScaler(enabled=True)\n", "")
    assert findings(once, "TL010") == [(17, 13)]
    per_pass = _REBUILT_UNDER_A_SETTING.replace(
        "        if cfg.fp16:\n            scaler =", "        if step % 2:\n            scaler =")
    assert (5, 18) not in findings(per_pass, "TL010")  # built on some passes only: not this check


_CYCLES = """
    for lo, hi in loader:
        netG.zero_grad(set_to_none=True)
        fake = netG(lo)
        scaler.scale(pixel(fake, hi) + adv(netD(fake))).backward()
        scaler.step(optG)
        scaler.update()
        {clear}
        scaler.scale(critic(netD(hi), netD(fake.detach()))).backward()
        scaler.step(optD)
        scaler.update()
"""


def test_complete_cycles_for_each_network_update_twice_harmlessly():
    """The discriminator is cleared after the generator's update, then back-propagated, stepped and updated: each
    gradient is unscaled at the scale it was made at, and a second update only counts the iteration again. Left
    uncleared, it keeps what the generator's backward (made at the old scale) left in it."""
    assert findings(_CYCLES.format(clear="netD.zero_grad(set_to_none=True)"), "TL010") == []
    assert findings(_CYCLES.format(clear="pass"), "TL010") == [(7, 5)]
    both_first = _CYCLES.format(clear="netD.zero_grad(set_to_none=True)").replace(
        "        scaler.step(optG)\n        scaler.update()\n", "").replace(
        "        scaler.step(optD)\n", "        scaler.step(optG)\n        scaler.update()\n        scaler.step(optD)\n")
    assert findings(both_first, "TL010") == [(9, 5)]  # optD's gradients, made before the first update


def test_a_scaler_built_with_its_optimizer_for_each_run():
    """Each pass of the outer loop is a run of its own, with a new model and optimizer: a new scaler belongs to it.
    A scaler built there for an optimizer of the whole script drops what it learned."""
    src = """
    for run in range(args.runs):
        model = Net()
        opt = torch.optim.Adam(model.parameters())
        if args.amp:
            scaler = torch.cuda.amp.GradScaler()
        for x, y in loader:
            opt.zero_grad()
            scaler.scale(crit(model(x), y)).backward()
            scaler.step(opt)
            scaler.update()
    """
    assert findings(src, "TL010") == []
    shared = src.replace("        opt = torch.optim.Adam(model.parameters())\n", "")
    assert findings(shared, "TL010") == [(5, 18)]


_HOOKS = """
    for p in model.parameters():
        p.register_hook({hook})
    scaler = GradScaler()
    for x, y in loader:
        opt.zero_grad()
        scaler.scale(crit(model(x), y)).backward()
        scaler.step(opt)
        scaler.update()
"""


@pytest.mark.parametrize("hook", ["lambda g: g.clamp(-5.0, 5.0)", "lambda g: torch.clamp(g, -clip, clip)", "clip_hook"])
def test_a_gradient_hook_that_clamps_scaled_gradients(hook):
    """The hook runs inside the backward, on gradients still multiplied by the loss scale: clamping them at 5
    clamps the true ones at 5 / 65536."""
    src = "\n    def clip_hook(g):\n        return g.clamp(-1, 1)\n" + _HOOKS.format(hook=hook)
    assert findings(src, "TL010") == [(6, 5)]


@pytest.mark.parametrize("src", [
    _HOOKS.format(hook="lambda g: g * mask"),  # scales by a mask: no bound to mis-scale
    _HOOKS.format(hook="lambda g: g.clamp(-5.0, 5.0)").replace("scaler.scale(crit(model(x), y)).backward()",
                                                            "crit(model(x), y).backward()")
    .replace("scaler.step(opt)", "opt.step()").replace("        scaler.update()\n", ""),  # no GradScaler
])
def test_gradient_hooks_that_see_true_gradients(src):
    assert findings(src, "TL010") == []


CRITICS_IN_TURN = """
import torch


def train_critics(critics, optims, batches, scaler):
    for _ in range(100):
        for axis in {axes}:
            {bind}
            opt.zero_grad()
            with torch.autocast("cuda"):
                loss = critics[axis](batches[axis]).mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
        {after}
"""


@pytest.mark.parametrize("axes, bind", [
    ("range(3)", "opt = optims[axis]"),              # a different optimizer on each pass, from the loop's index
    ("critics", "opt = optims[str(axis)]"),
    ("range(3)", "critic, opt = critics[axis], optims[axis]"),
])
def test_one_scaler_updated_once_after_stepping_each_optimizer_in_turn(axes, bind):
    """PyTorch's AMP notes for several optimizers: `scaler.step(opt)` for each, then one `scaler.update()`."""
    assert findings(CRITICS_IN_TURN.format(axes=axes, bind=bind, after="scaler.update()"), "TL010") == []


@pytest.mark.parametrize("bind, after", [
    ("opt = optims[0]", "scaler.update()"),  # the same optimizer on every pass: its second step has no update before it
    ("opt = optims[axis]", "pass"),           # no update at all
])
def test_steps_in_turn_without_an_update_after_them_are_still_reported(bind, after):
    assert findings(CRITICS_IN_TURN.format(axes="range(3)", bind=bind, after=after), "TL010") == [(13, 13)]


STAND_IN = """
import torch

{head}
    from torch.cuda.amp import GradScaler
{other}
    class GradScaler:
        def scale(self, loss):
            return loss

        def unscale_(self, optimizer):
            pass

        def step(self, optimizer):
            optimizer.step()

        def update(self):
            pass


def train(model, loader, optimizer, scaler):
    for x, y in loader:
        optimizer.zero_grad()
        scaler.scale(model(x, y)).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()


def main(model, loader, optimizer):
    train(model, loader, optimizer, GradScaler())
"""


@pytest.mark.parametrize("head, other", [("try:", "except ImportError:"), ("if torch.cuda.is_available():", "else:")])
def test_a_stand_in_class_for_an_imported_scaler_is_not_what_its_calls_run(head, other):
    """A class defined where the import of its name fails (or is not taken) stands in for it; where the import
    runs, `scaler.step(optimizer)` is GradScaler's step and `scaler.unscale_` unscales before the clip."""
    assert findings(STAND_IN.format(head=head, other=other), "TL010") == []
    without_unscale = STAND_IN.format(head=head, other=other).replace("        scaler.unscale_(optimizer)\n", "")
    assert findings(without_unscale, "TL010") == [(25, 9)]


SPLIT_STEP = """
import torch


class Trainer:
    def __init__(self, model, optimizers, clip):
        self.model = model
        self.optimizers = optimizers
        self.scaler = torch.cuda.amp.GradScaler()
        self.clip = clip

    def backward(self, x, y):
        with torch.autocast("cuda"):
            loss = self.model(x, y)
        self.scaler.scale(loss).backward()

    def step(self):
        for opt in self.optimizers:
            for group in opt.param_groups:
                torch.nn.utils.clip_grad_norm_(group["params"], self.clip)
            self.scaler.step(opt)
        self.scaler.update()
"""


def test_a_clip_in_the_method_that_steps_the_scaler_of_another_methods_backward():
    """The backward in one method, the clip and `self.scaler.step(opt)` in another: the clip sees scaled
    gradients (a trainer's backward() and step(), called in turn by a loop in another file)."""
    assert findings(SPLIT_STEP, "TL010") == [(20, 17)]
    assert "`self.scaler.unscale_(opt)` before it" in messages(SPLIT_STEP, "TL010")[0][2]


@pytest.mark.parametrize("old, new", [
    ("        self.scaler.scale(loss).backward()\n",                  # unscaled in the backward's method
     "        self.scaler.scale(loss).backward()\n        for opt in self.optimizers:\n"
     "            self.scaler.unscale_(opt)\n"),
    ("            for group in opt.param_groups:\n",                  # unscaled in the step's method
     "            self.scaler.unscale_(opt)\n            for group in opt.param_groups:\n"),
    ("            self.scaler.step(opt)\n        self.scaler.update()\n",  # the clip after the step
     "            pass\n        for opt in self.optimizers:\n            self.scaler.step(opt)\n"
     "        self.scaler.update()\n        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)\n"),
    ("self.scaler.scale(loss).backward()", "loss.backward()"),  # no scaled backward in the class
    ("self.scaler.step(opt)", "self.other_scaler.step(opt)"),   # another scaler's step
])
def test_a_split_step_that_unscales_or_clips_after_is_not_reported(old, new):
    assert old in SPLIT_STEP
    assert findings(SPLIT_STEP.replace(old, new), "TL010") == []


UPDATER = """
import torch


class Updater:
    def __init__(self, model, optimizer, clip):
        self.model = model
        self.optimizer = optimizer
        self.clip = clip

    def step(self, grad_scaler=None):
        if self.clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        if grad_scaler is not None:
            grad_scaler.step(self.optimizer)
            grad_scaler.update()
        else:
            self.optimizer.step()


def fit(model, loader, updater, criterion, scaler):
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = criterion(model(x), y)
        {backward}
        updater.step(scaler)
"""


def test_a_step_method_handed_the_scaler_clips_the_callers_scaled_gradients():
    """`Updater.step(grad_scaler)` clips, then `grad_scaler.step(...)`: the gradients are the scaled ones the
    caller's `scaler.scale(loss).backward()` made, and nothing in the file unscales them."""
    src = UPDATER.format(backward="scaler.scale(loss).backward()")
    assert findings(src, "TL010") == [(13, 13)]
    assert "`grad_scaler.step(self.optimizer)` unscales them only after it" in messages(src, "TL010")[0][2]


@pytest.mark.parametrize("backward", [
    "loss.backward()",                                                     # a plain backward: not known to be scaled
    "scaler.scale(loss).backward()\n        scaler.unscale_(updater.optimizer)",  # unscaled by the caller
])
def test_a_step_method_after_a_plain_backward_or_an_unscale_is_not_reported(backward):
    assert findings(UPDATER.format(backward=backward), "TL010") == []


def test_a_step_function_in_a_file_with_no_backward_is_checked():
    """An updater in a file of its own (the backward is the caller's, in another file): its clip before
    `grad_scaler.step(...)` is reported; without a clip, or with `grad_scaler.unscale_` first, nothing is."""
    src = UPDATER[:UPDATER.index("\n\ndef fit(")] + "\n"
    assert findings(src, "TL010") == [(13, 13)]
    assert findings(src.replace("torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)", "pass"),
                    "TL010") == []
    unscaled = src.replace("        if self.clip:\n",
                           "        if grad_scaler is not None:\n            grad_scaler.unscale_(self.optimizer)\n"
                           "        if self.clip:\n")
    assert findings(unscaled, "TL010") == []
