"""TL004 missing zero_grad."""

import pytest

from tests.helpers import findings, fixed, messages

POSITIVE = {
    "optimizer_bound_in_init_not_handed_to_the_base": (
        """
        class Runner(BaseRunner):
            def __init__(self, net, opt_a, loader):
                super().__init__(net, opt_a)
                self.loader = loader
                self.extra_opt = torch.optim.SGD(net.parameters(), lr=0.1)

            def run(self):
                for x in self.loader:
                    self.optimizer.zero_grad()
                    self.net(x).mean().backward()
                    self.extra_opt.step()
        """,
        [(12, 13)],
    ),
    "torch_code_that_also_imports_paddle": (
        """
        import paddle
        import torch

        opt = torch.optim.Adam(model.parameters())
        for x, y in loader:
            F.cross_entropy(model(x), y).backward()
            opt.step()
        """,
        [(8, 5)],
    ),
    "module_forward_without_clearing": (
        """
        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(8, 1)

            def forward(self, x):
                return self.body(x).mean()

        def fit(batches):
            scorer = Scorer()
            opt = torch.optim.SGD(scorer.parameters(), lr=0.1)
            for x in batches:
                loss = scorer(x)
                loss.backward()
                opt.step()
        """,
        [(16, 9)],
    ),
    "module_forward_clears_only_its_own_parameters": (
        """
        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(8, 1)

            def forward(self, x):
                self.zero_grad()
                return self.body(x).mean()

        def fit(batches):
            scorer = Scorer()
            extra = nn.Linear(8, 1)
            opt = torch.optim.SGD(scorer.parameters(), lr=0.1)
            extra_opt = torch.optim.SGD(extra.parameters(), lr=0.1)
            for x in batches:
                loss = scorer(x) + extra(x).mean()
                loss.backward()
                opt.step()
                extra_opt.step()
        """,
        [(20, 9)],
    ),
    "self_method_chain_that_never_clears": (
        """
        class Duo:
            def __init__(self, net, opt):
                self.net, self.opt = net, opt

            def run(self, loader, epochs):
                for _ in range(epochs):
                    self._epoch(loader)

            def _epoch(self, loader):
                for x in loader:
                    self._step(x)

            def _step(self, x):
                self.net(x).sum().backward()
                self.opt.step()
                self._after()

            def _after(self):
                self.log_count += 1
        """,
        [(16, 9)],
    ),
    "closure_from_a_factory_method": (
        """
        class Runner:
            def __init__(self, model):
                self.model = model
                self.optimizer = torch.optim.LBFGS(model.parameters())

            def make_closure(self, x, y):
                def closure():
                    loss = F.mse_loss(self.model(x), y)
                    loss.backward()
                    return loss
                return closure

            def fit(self, loader):
                for x, y in loader:
                    self.optimizer.step(self.make_closure(x, y))
        """,
        [(16, 13)],
    ),
    "script": (
        """
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        """,
        [(5, 5)],
    ),
    "zero_grad_only_before_loop": (
        """
        def train(model, loader, opt):
            opt.zero_grad()
            for x, y in loader:
                F.mse_loss(model(x), y).backward()
                opt.step()
        """,
        [(6, 9)],
    ),
    "trainer_method": (
        """
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.optim = torch.optim.AdamW(model.parameters(), lr=1e-3)

            def fit(self, loader):
                for epoch in range(self.epochs):
                    for batch in tqdm(loader):
                        loss = self.model(batch).loss
                        loss.backward()
                        self.optim.step()
        """,
        [(12, 17)],
    ),
    "nested_zero_per_epoch_only": (
        """
        for epoch in range(10):
            optimizer.zero_grad()
            for x, y in loader:
                criterion(model(x), y).backward()
                optimizer.step()
        """,
        [(6, 9)],
    ),
    "gan_generator_never_cleared": (
        """
        optimizerD = optim.Adam(netD.parameters())
        optimizerG = optim.Adam(netG.parameters())
        for real in loader:
            netD.zero_grad()
            errD = bce(netD(real), ones)
            errD.backward()
            optimizerD.step()
            errG = bce(netD(netG(z)), ones)
            errG.backward()
            optimizerG.step()
        """,
        [(11, 5)],
    ),
    "scaler_step": (
        """
        scaler = torch.cuda.amp.GradScaler()
        for x, y in loader:
            with torch.autocast("cuda"):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        """,
        [(7, 5)],
    ),
    "while_with_enumerate_custom_name": (
        """
        sgd = torch.optim.SGD(net.parameters(), lr=0.1)
        it = 0
        while it < 100:
            for i, (x, y) in enumerate(loader):
                loss = loss_fn(net(x), y)
                loss.backward()
                sgd.step()
            it += 1
        """,
        [(8, 9)],
    ),
    "helper_steps_without_zeroing": (
        """
        def update(loss, optimizer):
            loss.backward()
            optimizer.step()

        for x, y in loader:
            update(criterion(model(x), y), optimizer)
        """,
        [(4, 5)],
    ),
    "accumulation_without_zero": (
        """
        for i, (x, y) in enumerate(loader):
            (criterion(model(x), y) / k).backward()
            if (i + 1) % k == 0:
                optimizer.step()
        """,
        [(5, 9)],
    ),
    # -- a training step reached through an object of a class of the file (receiver types) -------------------
    "object_of_a_class_of_the_file": (
        """
        class Trainer:
            def __init__(self, model, optimizer):
                self.model = model
                self.optimizer = optimizer

            def train_step(self, x, y):
                loss = (self.model(x) - y).pow(2).mean()
                loss.backward()
                self.optimizer.step()

        trainer = Trainer(net, torch.optim.SGD(net.parameters(), lr=0.1))
        for x, y in loader:
            trainer.train_step(x, y)
        """,
        [(10, 9)],
    ),
    "object_held_by_another_object": (
        """
        class Updater:
            def __init__(self, opt):
                self.opt = opt

            def update(self, loss):
                loss.backward()
                self.opt.step()

        class Runner:
            def __init__(self, net, opt):
                self.net = net
                self.updater = Updater(opt)

            def run(self, loader):
                for x in loader:
                    self.updater.update(self.net(x).sum())
        """,
        [(8, 9)],
    ),
    # -- a clearing on the other arm of a condition fixed for the whole loop ---------------------------------
    "zero_grad_only_on_the_mixed_precision_arm": (
        """
        for images, labels in loader:
            loss = crit(net(images), labels)
            if cfg.use_amp:
                opt.zero_grad()
                grad_scaler.scale(loss).backward()
                grad_scaler.step(opt)
                grad_scaler.update()
            else:
                loss.backward()
                opt.step()
        """,
        [(11, 9)],
    ),
    # -- unresolved methods of a base class that cannot clear: a context's factory, a criterion attribute ------
    "unresolved_context_and_criterion_of_a_base": (
        """
        class Finetune(ExternalRecipe):
            def fit(self, loader):
                self.opt.zero_grad()
                for batch in loader:
                    with self.precision_context():
                        pred = self.net(batch["x"])
                        loss = self.loss_fn(pred, batch["y"])
                    loss.backward()
                    self.opt.step()
        """,
        [(10, 13)],
    ),
    "closure_from_a_factory_bound_to_a_name": (
        """
        class Fitter:
            def closure_for(self, x, y):
                def evaluate():
                    err = F.mse_loss(self.net(x), y)
                    err.backward()
                    return err
                return evaluate

            def fit(self, loader):
                for x, y in loader:
                    evaluate = self.closure_for(x, y)
                    self.optimizer.step(evaluate)
        """,
        [(13, 13)],
    ),
    "optimizer_rebound_other_model_cleared": (
        """
        opt = torch.optim.Adam(critic.parameters())
        opt = torch.optim.Adam(actor.parameters())
        for x, y in loader:
            encoder.zero_grad()
            F.mse_loss(actor(x), y).backward()
            opt.step()
        """,
        [(7, 5)],
    ),
    # -- a clearing under the loop's first pass only --------------------------------------------------------
    "zero_grad_only_when_the_counter_is_at_its_start": (
        """
        for n, (x, y) in enumerate(loader):
            if n == 0:
                opt.zero_grad()
            crit(net(x), y).backward()
            opt.step()
        """,
        [(6, 5)],
    ),
    "zero_grad_only_in_the_first_pass_of_a_counted_loop": (
        """
        for epoch in range(epochs):
            for it in range(1, iters):
                if warm and 1 == it:
                    opt.zero_grad()
                crit(net(next(data))).backward()
                opt.step()
        """,
        [(7, 9)],
    ),
    "cleared_on_a_remainder_the_default_window_never_gives": (
        """
        def fit(net, opt, loader, accum):
            for i, (x, y) in enumerate(loader):
                if i % accum == 1:
                    opt.zero_grad()
                F.mse_loss(net(x), y).backward()
                if i % accum == 0:
                    opt.step()
        """,
        [(5, 13)],
    ),
    "update_function_clears_on_a_remainder": (
        """
        class Seq2SeqRunner(Engine):
            @staticmethod
            def update(runner, batch):
                if runner.state.iteration % runner.cfg.every == 1:
                    runner.optim.zero_grad()
                runner.crit(runner.net(batch.x), batch.y).backward()
                if runner.state.iteration % runner.cfg.every == 0:
                    runner.optim.step()
        """,
        [(6, 13)],
    ),
    "ignite_process_function_never_clears": (
        """
        from ignite.engine import Engine, Events

        def update(engine, batch):
            net.train()
            x, y = batch
            loss = crit(net(x), y)
            loss.backward()
            opt.step()
            return loss.item()

        trainer = Engine(update)
        """,
        [(9, 5)],
    ),
    "ignite_engine_subclass_method_never_clears": (
        """
        from ignite.engine import Engine

        class Fitter(Engine):
            def __init__(self, net, opt):
                self.net, self.opt = net, opt
                super().__init__(self._one)

            def _one(self, engine, batch):
                self.net(batch).mean().backward()
                self.opt.step()

        class Tuner(Engine):
            @staticmethod
            def run_batch(engine, batch):
                engine.net(batch).mean().backward()
                engine.opt.step()

        tuner = Tuner(Tuner.run_batch)
        """,
        [(11, 9), (17, 9)],
    ),
    "xla_optimizer_step_steps_its_argument": (
        """
        import torch_xla.core.xla_model as xm

        def fit(net, batches, sgd):
            for a, b in batches:
                F.mse_loss(net(a), b).backward()
                xm.optimizer_step(sgd, barrier=True)
        """,
        [(7, 9)],
    ),
    "xla_optimizer_step_imported_by_name": (
        """
        from torch_xla.core.xla_model import optimizer_step

        def fit(net, batches, sgd):
            for a, b in batches:
                F.mse_loss(net(a), b).backward()
                optimizer_step(sgd)
        """,
        [(7, 9)],
    ),
    "xla_module_imported_from_its_package": (
        """
        from torch_xla.core import xla_model as tpu

        def fit(net, batches, sgd):
            for a, b in batches:
                F.mse_loss(net(a), b).backward()
                tpu.optimizer_step(sgd)
        """,
        [(7, 9)],
    ),
    "clearing_only_when_an_optional_object_is_there": (
        """
        class Fitter:
            def __init__(self, net, optim):
                self.net = net
                self.optim = optim
                self.warmup = None

            def fit(self, batches):
                self.warmup = self.make_warmup()
                for a, b in batches:
                    self.net(a).sum().backward()
                    self.optim.step()
                    if self.warmup:
                        self.warmup.step()
                        self.optim.zero_grad()
        """,
        [(12, 13)],
    ),
    "clearing_only_when_a_parameter_defaulting_to_none_is_given": (
        """
        def fit(net, batches, optim, ema=None):
            for a, b in batches:
                net(a).sum().backward()
                optim.step()
                if ema is not None:
                    ema.update(net)
                    optim.zero_grad()
        """,
        [(5, 9)],
    ),
    "first_pass_test_of_a_copy_of_the_counter_in_a_helper": (
        """
        class Fitter:
            def one(self, a):
                if self.pos == 0:
                    self.optim.zero_grad()
                self.net(a).sum().backward()
                self.optim.step()

            def fit(self, batches):
                for i, a in enumerate(batches):
                    self.pos = i
                    self.one(a)
        """,
        [(7, 9)],
    ),
    "first_pass_test_of_a_copy_of_the_counter": (
        """
        def fit(net, batches, optim):
            for i, a in enumerate(batches):
                k = i
                if k == 0:
                    optim.zero_grad()
                net(a).sum().backward()
                optim.step()
        """,
        [(8, 9)],
    ),
    "another_modules_clearing_leaves_an_optimizer_its_holder_builds_over_itself": (
        """
        class Critic(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 1)
                self.optimizer = torch.optim.Adam(self.parameters())

        class Pair:
            def __init__(self):
                self.critic, self.painter = Critic(), Critic()

            def fit(self, loader):
                for x in loader:
                    self.painter.zero_grad()
                    self.critic.net(x).mean().backward()
                    self.critic.optimizer.step()
        """,
        [(16, 13)],
    ),
    # written by hand too, but over torch's gradients: nothing clears them
    "hand_written_optimizer_reading_grad": (
        """
        class PlainSGD:
            def __init__(self, params, lr=0.1):
                self.params, self.lr = list(params), lr

            def step(self):
                for p in self.params:
                    p.data -= self.lr * p.grad

        optimizer = PlainSGD(model.parameters())
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        """,
        [(14, 5)],
    ),
}

NEGATIVE = {
    # a wrapper of the optimizer (its schedulers beside it) cleared: its zero_grad clears the optimizer it holds
    "wrapper_holding_the_stepped_optimizer_cleared": """
        class Trainer:
            def _step(self, batch):
                self.optim.zero_grad(set_to_none=True)
                loss = self.model(batch).mean()
                self.scaler.scale(loss).backward()

            def train_epoch(self, loader):
                for batch in loader:
                    self._step(batch)
                    self.scaler.step(self.optim.optimizer)
                    self.scaler.update()
        """,
    "stepped_optimizer_handed_to_the_base_that_clears_it_by_another_name": """
        class Runner(BaseRunner):
            def __init__(self, net, opt_a, loader):
                super().__init__(net, opt_a)
                self.loader = loader
                self.critic_opt = opt_a

            def run(self):
                for x in self.loader:
                    self.optimizer.zero_grad()
                    self.net(x).mean().backward()
                    self.critic_opt.step()
        """,
    "the_holders_own_clearing_clears_the_optimizer_it_builds_over_itself": """
        class Critic(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 1)
                self.optimizer = torch.optim.Adam(self.parameters())

        class Pair:
            def __init__(self):
                self.critic, self.painter = Critic(), Critic()

            def fit(self, loader):
                for x in loader:
                    self.critic.zero_grad()
                    self.critic.net(x).mean().backward()
                    self.critic.optimizer.step()
        """,
    "a_training_step_method_no_loop_of_the_project_runs": """
        class Critic(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 1)
                self.optimizer = torch.optim.Adam(self.parameters())

            def step(self, x):
                self.net(x).mean().backward()
                self.optimizer.step()
        """,
    "zero_grad_in_the_first_micro_batch_of_each_batch": """
        for batch in loader:
            for micro, chunk in enumerate(batch.split(4)):
                if micro == 0:
                    opt.zero_grad()
                net(chunk).sum().backward()
            opt.step()
        """,
    "first_pass_clearing_and_one_after_each_step": """
        for i, x in enumerate(loader):
            if i == 0:
                opt.zero_grad()
            net(x).sum().backward()
            opt.step()
            opt.zero_grad()
        """,
    "counter_compared_with_a_value_it_never_starts_from": """
        for i in range(1, n):
            if i == 0:
                opt.zero_grad()
            net(data[i]).sum().backward()
            if i == 0:
                opt.step()
        """,
    "step_under_the_same_first_pass_guard": """
        for i, x in enumerate(loader):
            net(x).sum().backward()
            if i == 0:
                opt.step()
                opt.zero_grad()
        """,
    "counter_the_loop_assigns": """
        for i, x in enumerate(loader):
            if i == 0:
                opt.zero_grad()
            net(x).sum().backward()
            opt.step()
            i = 0
        """,
    "clearing_under_a_command_line_flag_default_off": """
        parser = argparse.ArgumentParser()
        parser.add_argument("--clear", action="store_true")
        args = parser.parse_args()
        for x in loader:
            if args.clear:
                opt.zero_grad()
            net(x).sum().backward()
            opt.step()
        """,
    "clearing_under_a_command_line_flag_default_on": """
        parser = argparse.ArgumentParser()
        parser.add_argument("--clear", type=int, default=1)
        args = parser.parse_args()
        for x in loader:
            net(x).sum().backward()
            opt.step()
            if args.clear:
                opt.zero_grad()
        """,
    "clearing_in_a_method_called_every_iteration_under_the_window": """
        class Runner:
            def reset(self):
                self.opt.zero_grad()

            def fit(self, loader):
                for i, x in enumerate(loader):
                    self.net(x).sum().backward()
                    if (i + 1) % self.k == 0:
                        self.opt.step()
                        self.reset()
        """,
    "ignite_process_function_clears_itself_or_in_a_handler": """
        from ignite.engine import Engine, Events

        def update(engine, batch):
            opt.zero_grad()
            crit(net(batch[0]), batch[1]).backward()
            opt.step()

        def update_b(engine, batch):
            crit(net_b(batch[0]), batch[1]).backward()
            opt_b.step()

        trainer = Engine(update)
        trainer_b = Engine(process_function=update_b)

        @trainer_b.on(Events.ITERATION_STARTED)
        def clear(engine):
            opt_b.zero_grad()
        """,
    "a_per_step_function_not_handed_to_an_engine": """
        from ignite.engine import Engine

        def update(engine, batch):
            crit(net(batch[0]), batch[1]).backward()
            opt.step()

        evaluator = Engine(evaluate)
        """,
    "an_engine_that_is_not_ignites": """
        from mylib.engine import Engine

        def update(engine, batch):
            crit(net(batch[0]), batch[1]).backward()
            opt.step()

        trainer = Engine(update)
        """,
    "cleared_at_the_window_start_or_without_a_window": """
        def fit(net, opt, loader, accum):
            for i, (x, y) in enumerate(loader):
                if i % accum == 1 or accum == 1:
                    opt.zero_grad()
                F.mse_loss(net(x), y).backward()
                if i % accum == 0:
                    opt.step()
        """,
    "cleared_after_the_window_step": """
        def fit(net, opt, loader, accum):
            for i, (x, y) in enumerate(loader):
                F.mse_loss(net(x), y).backward()
                if (i + 1) % accum == 0:
                    opt.step()
                    opt.zero_grad()
        """,
    "remainder_window_of_a_constant_size": """
        every = 4
        def fit(net, opt, loader):
            for i, (x, y) in enumerate(loader):
                if i % 4 == 1:
                    opt.zero_grad()
                F.mse_loss(net(x), y).backward()
                if i % 4 == 0:
                    opt.step()
            k = 3
            for i, (x, y) in enumerate(loader):
                if i % k == 2:
                    opt.zero_grad()
                F.mse_loss(net(x), y).backward()
                if i % k == 0:
                    opt.step()
        """,
    "remainder_window_of_an_option_with_a_larger_default": """
        parser = argparse.ArgumentParser()
        parser.add_argument("--accum", type=int, default=8)
        args = parser.parse_args()
        for i, (x, y) in enumerate(loader):
            if i % args.accum == 1:
                opt.zero_grad()
            F.mse_loss(net(x), y).backward()
            if i % args.accum == 0:
                opt.step()
        """,
    "also_cleared_outside_the_remainder": """
        def fit(net, opt, loader, accum):
            for i, (x, y) in enumerate(loader):
                if i % accum == 1:
                    opt.zero_grad()
                F.mse_loss(net(x), y).backward()
                if i % accum == 0:
                    opt.step()
                    opt.zero_grad()
        """,
    "closure_from_a_factory_bound_to_a_name_clears": """
        class Fitter:
            def closure_for(self, x, y):
                def evaluate():
                    self.optimizer.zero_grad()
                    err = F.mse_loss(self.net(x), y)
                    err.backward()
                    return err
                return evaluate

            def fit(self, loader):
                for x, y in loader:
                    evaluate = self.closure_for(x, y)
                    self.optimizer.step(evaluate)
        """,
    "module_forward_clears_its_gradients": """
        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(8, 1)

            def forward(self, x):
                self.zero_grad()
                return self.body(x).mean()

        def fit(batches):
            scorer = Scorer()
            opt = torch.optim.SGD(scorer.body.parameters(), lr=0.1)
            for x in batches:
                loss = scorer(x)
                loss.backward()
                opt.step()
        """,
    "self_method_chain_clears_two_calls_down": """
        class Duo:
            def __init__(self, net, opt):
                self.net, self.opt = net, opt

            def run(self, loader, epochs):
                for _ in range(epochs):
                    self._epoch(loader)

            def _epoch(self, loader):
                for x in loader:
                    self._step(x)

            def _step(self, x):
                self.net(x).sum().backward()
                self.opt.step()
                self._reset()

            def _reset(self):
                self.opt.zero_grad()
        """,
    "paddle_code_is_not_pytorch": """
        import paddle

        opt = paddle.optimizer.Adam(parameters=model.parameters())
        for x, y in loader:
            loss = paddle.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.clear_grad()
        """,
    "closure_from_a_factory_that_clears": """
        def make_closure(model, optimizer, x, y):
            def closure():
                optimizer.zero_grad()
                loss = F.mse_loss(model(x), y)
                loss.backward()
                return loss
            return closure

        optimizer = torch.optim.LBFGS(model.parameters())
        for x, y in loader:
            optimizer.step(make_closure(model, optimizer, x, y))
        """,
    "zero_at_top": """
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        """,
    "zero_at_end_set_to_none": """
        for x, y in loader:
            criterion(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        """,
    "model_zero_grad": """
        for x, y in loader:
            model.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        """,
    "zero_in_helper": """
        class Trainer:
            def clear(self):
                self.optimizer.zero_grad()

            def fit(self):
                for b in self.loader:
                    self.clear()
                    self.loss(b).backward()
                    self.optimizer.step()
        """,
    "lbfgs_closure": """
        optimizer = torch.optim.LBFGS(model.parameters())
        for x, y in loader:
            def closure():
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                return loss
            optimizer.step(closure)
        """,
    "accumulation_guarded_zero": """
        for i, (x, y) in enumerate(loader):
            (criterion(model(x), y) / k).backward()
            if (i + 1) % k == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "env_step_rl": """
        for t in range(1000):
            action = policy(obs)
            obs, reward, done, info = env.step(action)
            scheduler.step()
            prof.step()
        """,
    "deepspeed_engine": """
        model_engine, optimizer, _, _ = deepspeed.initialize(model=model, config=cfg)
        for batch in loader:
            loss = model_engine(batch)
            model_engine.backward(loss)
            model_engine.step()
        """,
    "param_grad_none": """
        for x, y in loader:
            for p in model.parameters():
                p.grad = None
            criterion(model(x), y).backward()
            opt.step()
        """,
    "accelerate_loop": """
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
        """,
    "lightning_manual": """
        class Model(LightningModule):
            def training_step(self, batch, idx):
                opt = self.optimizers()
                for micro in batch:
                    opt.zero_grad()
                    self.manual_backward(self.loss(micro))
                    opt.step()
        """,
    "no_backward_in_loop": """
        for epoch in range(10):
            scheduler.step()
            optimizer.step()
        """,
    "dist_autograd_context_holds_the_gradients": """
        for inputs, target in batches():
            with dist_autograd.context() as context_id:
                loss = criterion(model(inputs), target)
                dist_autograd.backward(context_id, [loss])
                opt.step(context_id)
        """,
    "zero_grad_helper_imported_from_another_file": """
        from .fp16 import zero_grad
        for batch in loader:
            zero_grad(params)
            loss = compute(batch)
            loss.backward()
            opt.step()
        """,
    "optimizer_handed_to_a_helper_of_another_file": """
        from .engine import after_step
        for batch in loader:
            loss = model(batch).mean()
            loss.backward()
            optimizer.step()
            after_step(optimizer, scheduler)
        """,
    "object_whose_method_clears": """
        class Trainer:
            def __init__(self, model, optimizer):
                self.model = model
                self.optimizer = optimizer

            def train_step(self, x):
                self.optimizer.zero_grad()
                self.model(x).sum().backward()
                self.optimizer.step()

        trainer = Trainer(net, torch.optim.SGD(net.parameters(), lr=0.1))
        for x in loader:
            trainer.train_step(x)
        """,
    "object_of_unknown_class": """
        class Trainer:
            def train_step(self, x):
                self.model(x).sum().backward()
                self.optimizer.step()

        trainer = make_trainer() if fast else Trainer()
        for x in loader:
            trainer.train_step(x)
            trainer.clear()
        """,
    "zero_grad_on_both_arms": """
        for images, labels in loader:
            loss = crit(net(images), labels)
            if cfg.use_amp:
                opt.zero_grad()
                grad_scaler.scale(loss).backward()
                grad_scaler.step(opt)
                grad_scaler.update()
            else:
                opt.zero_grad()
                loss.backward()
                opt.step()
        """,
    "zero_grad_on_an_arm_the_loop_alternates": """
        for it, (images, labels) in enumerate(loader):
            if it % 2 == 0:
                opt.zero_grad()
            else:
                loss = crit(net(images), labels)
                loss.backward()
                opt.step()
        """,
    "zero_grad_on_an_arm_a_flag_of_the_loop_chooses": """
        fresh = True
        for images, labels in loader:
            if fresh:
                opt.zero_grad()
                fresh = False
            else:
                crit(net(images), labels).backward()
                opt.step()
                fresh = True
        """,
    "zero_grad_before_the_branch": """
        for images, labels in loader:
            opt.zero_grad()
            loss = crit(net(images), labels)
            if cfg.use_amp:
                grad_scaler.scale(loss).backward()
                grad_scaler.step(opt)
                grad_scaler.update()
            else:
                loss.backward()
                opt.step()
        """,
    "unresolved_plain_method_of_a_base_may_clear": """
        class Finetune(ExternalRecipe):
            def fit(self, loader):
                for batch in loader:
                    self.before_batch()
                    with self.precision_context():
                        loss = self.loss_fn(self.net(batch["x"]), batch["y"])
                    loss.backward()
                    self.opt.step()
        """,
    "unresolved_method_result_used_may_clear": """
        class Finetune(ExternalRecipe):
            def fit(self, loader):
                for batch in loader:
                    loss = self.compute(batch)
                    loss.backward()
                    self.opt.step()
        """,
    "stage_optimizer_rebound_over_another_model": """
        for stage in range(4):
            learner = Learner.make(stage)
            opt = torch.optim.Adam(learner.parameters())
            for x, y in loader:
                learner.zero_grad()
                F.mse_loss(learner(x), y).backward()
                opt.step()
            opt = torch.optim.Adam(ensemble.parameters())
            for x, y in loader:
                opt.zero_grad()
                F.mse_loss(ensemble(x), y).backward()
                opt.step()
    """,
    "xla_optimizer_step_after_clearing": """
        import torch_xla.core.xla_model as xm

        def fit(net, batches, sgd):
            for a, b in batches:
                sgd.zero_grad()
                F.mse_loss(net(a), b).backward()
                xm.optimizer_step(sgd)
    """,
    "optimizer_step_of_another_library_may_clear": """
        import accelerate_tools as xm

        def fit(net, batches, sgd):
            for a, b in batches:
                F.mse_loss(net(a), b).backward()
                xm.optimizer_step(sgd)
    """,
    "optimizer_step_method_of_an_object": """
        def fit(trainer, net, batches, sgd):
            for a, b in batches:
                F.mse_loss(net(a), b).backward()
                trainer.optimizer_step(sgd)
    """,
    "optional_object_always_built": """
        class Fitter:
            def __init__(self, net, optim):
                self.net = net
                self.optim = optim
                self.warmup = None

            def setup(self):
                self.warmup = WarmupLR(self.optim)

            def fit(self, batches):
                for a, b in batches:
                    self.net(a).sum().backward()
                    self.optim.step()
                    if self.warmup:
                        self.warmup.step()
                        self.optim.zero_grad()
    """,
    "optional_object_never_bound_none": """
        class Fitter:
            def __init__(self, net, optim, warmup):
                self.net = net
                self.optim = optim
                self.warmup = warmup

            def fit(self, batches):
                for a, b in batches:
                    self.net(a).sum().backward()
                    self.optim.step()
                    if self.warmup:
                        self.warmup.step()
                        self.optim.zero_grad()
    """,
    "parameter_defaulting_to_none_replaced_before_the_loop": """
        def fit(net, batches, optim, ema=None):
            if ema is None:
                ema = Ema(net)
            for a, b in batches:
                net(a).sum().backward()
                optim.step()
                if ema is not None:
                    ema.update(net)
                    optim.zero_grad()
    """,
    "optional_optimizer_that_the_step_reads": """
        def fit(net, batches, optim=None):
            for a, b in batches:
                net(a).sum().backward()
                if optim:
                    optim.zero_grad()
                optim.step()
    """,
    "step_under_the_same_presence_test": """
        def fit(net, batches, optim, ema=None):
            for a, b in batches:
                net(a).sum().backward()
                if ema is not None:
                    optim.step()
                    ema.update(net)
                    optim.zero_grad()
    """,
    "presence_test_of_a_flag_set_in_the_loop": """
        def fit(net, batches, optim, flag=None):
            for a, b in batches:
                flag = a.numel() > 0
                net(a).sum().backward()
                optim.step()
                if flag:
                    optim.zero_grad()
    """,
    "helper_tests_an_attribute_set_from_the_counter_modulo": """
        class Fitter:
            def one(self, a):
                if self.pos == 0:
                    self.optim.zero_grad()
                self.net(a).sum().backward()
                self.optim.step()

            def fit(self, batches):
                for i, a in enumerate(batches):
                    self.pos = i % 4
                    self.one(a)
    """,
    "helper_tests_an_attribute_set_after_it_runs": """
        class Fitter:
            def one(self, a):
                if self.pos == 0:
                    self.optim.zero_grad()
                self.net(a).sum().backward()
                self.optim.step()

            def fit(self, batches):
                for i, a in enumerate(batches):
                    self.one(a)
                    self.pos = i
    """,
    "helper_tests_its_own_parameter_named_like_the_counter": """
        class Fitter:
            def one(self, a, i):
                if i == 0:
                    self.optim.zero_grad()
                self.net(a).sum().backward()
                self.optim.step()

            def fit(self, batches):
                for i, a in enumerate(batches):
                    self.one(a, 0)
    """,
    "method_of_another_object_tests_its_own_attribute": """
        class Worker:
            def one(self, a):
                if self.pos == 0:
                    self.optim.zero_grad()
                self.net(a).sum().backward()
                self.optim.step()

        class Fitter:
            def fit(self, batches):
                self.worker = Worker()
                for i, a in enumerate(batches):
                    self.pos = i
                    self.worker.one(a)
    """,
    "copy_of_the_counter_made_under_a_condition": """
        def fit(net, batches, optim, warm):
            k = 0
            for i, a in enumerate(batches):
                if warm:
                    k = i
                if k == 0:
                    optim.zero_grad()
                net(a).sum().backward()
                optim.step()
    """,
    # an optimizer written by hand over NumPy weights: its step reads the gradients it is handed, none of torch's
    "hand_written_optimizer_over_arrays": """
        import numpy as np

        class SGDMomentum:
            def __init__(self, model, lr=0.05, momentum=0.9):
                self.model, self.lr, self.momentum = model, lr, momentum
                self.v = {k: np.zeros_like(w) for k, w in model.weights.items()}

            def step(self, grads):
                for key, grad in grads.items():
                    self.v[key] = self.momentum * self.v[key] - self.lr * grad
                    self.model.weights[key] += self.v[key]

        model = MLP(2, 64, 1)
        optimizer = SGDMomentum(model)
        for epoch in range(10):
            for xb, yb in batches(x, y):
                loss = bce(model.forward(xb), yb)
                grads = model.backward(yb)
                optimizer.step(grads)
        """,
    # the EMA "optimizer" handed to the epoch function by the one call of it: its class, known from the caller,
    # reads no gradient
    "weight_ema_handed_in_by_the_caller": """
        import torch

        class WeightEMA(object):
            def __init__(self, model, ema_model, alpha=0.999):
                self.params = list(model.state_dict().values())
                self.ema_params = list(ema_model.state_dict().values())
                self.alpha = alpha

            def step(self):
                for param, ema_param in zip(self.params, self.ema_params):
                    ema_param.mul_(self.alpha).add_(param * (1 - self.alpha))

        def train_epoch(model, loader, optimizer, ema_optimizer, criterion):
            for x, y in loader:
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                ema_optimizer.step()

        def main(model, ema_model, loader, criterion):
            optimizer = torch.optim.Adam(model.parameters())
            ema_optimizer = WeightEMA(model, ema_model)
            for epoch in range(10):
                train_epoch(model, loader, optimizer, ema_optimizer, criterion)
        """,
}


@pytest.mark.parametrize("name", POSITIVE)
def test_positive(name):
    src, expected = POSITIVE[name]
    assert findings(src, "TL004") == expected


@pytest.mark.parametrize("name", NEGATIVE)
def test_negative(name):
    assert findings(NEGATIVE[name], "TL004") == []


def test_fix_inserts_after_step():
    out = fixed(POSITIVE["script"][0], "TL004")
    assert "    optimizer.step()\n    optimizer.zero_grad()\n" in out
    assert fixed(out, "TL004") == out


def test_fix_after_scaler_update():
    out = fixed(POSITIVE["scaler_step"][0], "TL004")
    assert "    scaler.update()\n    opt.zero_grad()\n" in out


def test_fix_under_accumulation_guard():
    out = fixed(POSITIVE["accumulation_without_zero"][0], "TL004")
    assert "        optimizer.step()\n        optimizer.zero_grad()\n" in out


def test_optimizer_created_each_iteration_is_not_flagged():
    src = """
    for i in range(num_iterations):
        pred = model(x)
        pred.sum().backward()
        optimizer_base = optim.SGD(model.parameters(), lr=0.01)
        optimizer_base.step()
    """
    assert findings(src, "TL004") == []


def test_message():
    """The full text of the finding, so a change of wording is seen here."""
    assert messages(POSITIVE["closure_from_a_factory_method"][0], "TL004") == [(
        16, 13,
        "`self.optimizer.step(self.make_closure(x, y))` runs in a loop that never clears "
        "`self.optimizer`'s gradients: backward() adds into .grad, so each step applies the sum of all "
        "earlier gradients; call `self.optimizer.zero_grad()`",
    )]


def test_message_of_a_first_pass_clearing():
    assert messages(POSITIVE["zero_grad_only_when_the_counter_is_at_its_start"][0], "TL004") == [(
        6, 5,
        "`opt.step()` runs in a loop that only clears `opt`'s gradients in its first pass: backward() adds into "
        ".grad, so each step applies the sum of all earlier gradients; call `opt.zero_grad()`",
    )]


def test_gradients_written_by_hand_before_each_step_add_up_to_nothing():
    """`target.grad = source.grad.clone()` before the mirror optimizer's step: each step applies what the loop
    wrote, not a sum (a check that two optimizers agree)."""
    src = """
        for _ in range(count):
            optimizer.zero_grad(set_to_none=True)
            loss_fn(model(data)).backward()
            for target, source in zip(mirror, model.parameters()):
                target.grad = source.grad.clone()
            mirror_optimizer.step()
            optimizer.step()
    """
    assert findings(src, "TL004") == []
    assert findings(src.replace("target.grad = source.grad.clone()", "target.data += 0"), "TL004") == [(7, 5)]


def test_a_module_cleared_beside_an_optimizer_both_handed_in():
    """`adv.zero_grad()` and `adv_optimizer.step()` of parameters: which parameters the optimizer holds is not known
    here, whatever the file binds under that name elsewhere (`adv_optimizer = Adam(adv_model.parameters())`)."""
    src = """
        def train(clf, adv, loader, crit, adv_optimizer):
            for x, z in loader:
                adv.zero_grad()
                loss = crit(adv(clf(x)), z)
                loss.backward()
                adv_optimizer.step()

        adv_model = Adversary()
        adv_optimizer = optim.Adam(adv_model.parameters(), lr=0.01)
        """
    assert findings(src, "TL004") == []
    bound_here = src.replace("def train(clf, adv, loader, crit, adv_optimizer):",
                             "def train(clf, adv, loader, crit):\n            adv_optimizer = optim.Adam(clf.parameters())")
    assert findings(bound_here, "TL004") == [(8, 9)]


SELF_OPTIMIZER = """
import torch
from torch import nn, optim


class Learner(nn.Module):
    def __init__(self, n_in, n_out, teacher):
        super().__init__()
        self.net = nn.Linear(n_in, n_out)
        self.teacher = teacher
        self.opt = optim.SGD(self.parameters(), 0.1, momentum=0.9)

    def forward(self, x):
        return self.net(x)

    def observe(self, xs, ys):
        for x, y in zip(xs, ys):
            {clear}
            loss = nn.functional.cross_entropy(self.forward(x), y)
            loss.backward()
            self.opt.step()
"""


def test_a_sub_module_cleared_under_an_optimizer_of_the_whole_object_is_a_clearing():
    """`self.opt` steps `self.parameters()`, which holds `self.net`'s: `self.net.zero_grad()` clears them."""
    assert findings(SELF_OPTIMIZER.format(clear="self.net.zero_grad()"), "TL004") == []


def test_an_optimizer_of_the_whole_object_is_not_cleared_by_another_objects_zero_grad():
    assert findings(SELF_OPTIMIZER.format(clear="teacher_net = self.teacher\n            teacher_net.zero_grad()"),
                    "TL004") == [(22, 13)]
