"""TL005 unscaled gradient accumulation."""

import pytest

from tests.helpers import findings, fixed, messages

POSITIVE = {
    "div_by_something_else_than_the_window": (
        """
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for i, (x, y) in enumerate(loader):
            criterion(model(x), y).div(temperature).backward()
            if (i + 1) % grad_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(4, 5)],
    ),
    # a guard around the whole window (`if mode == "train":`), shared by the backward and the step, is no window
    "window_inside_a_guard_the_backward_shares": (
        """
        class Trainer:
            def _step(self, mode, idx, batch):
                x, y = batch
                loss = F.cross_entropy(self.model(x), y)
                if mode == "train":
                    loss.backward()
                    if idx % self.grad_accumulation_steps == 0:
                        self.optimizer.step()
                        self.optimizer.zero_grad()
                return loss

            def fit(self, loader):
                for mode in ("train", "eval"):
                    for idx, batch in enumerate(loader, start=1):
                        self._step(mode, idx, batch)
        """,
        [(7, 13)],
    ),
    # -- scale-invariant optimizers: reported only when something sees the summed gradient's size ---------------
    "adam_with_clipping": (
        """
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            if (i + 1) % accum == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(5, 5)],
    ),
    "adam_with_coupled_weight_decay": (
        """
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-2)
        for i, (x, y) in enumerate(loader):
            criterion(model(x), y).backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(4, 5)],
    ),
    # the optimizer handed to the training function: one caller passes an AdamW, another an SGD
    "optimizer_handed_by_callers_one_sgd": (
        """
        def train_epoch(model, loader, optimizer, accum):
            for i, (x, y) in enumerate(loader):
                criterion(model(x), y).backward()
                if i % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()

        def fine_tune(model, loader):
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            train_epoch(model, loader, opt, 4)

        def pretrain(model, loader):
            sgd = torch.optim.SGD(model.parameters(), lr=0.1)
            train_epoch(model, loader, optimizer=sgd, accum=8)
        """,
        [(4, 9)],
    ),
    # the same window, each micro-batch's sum divided by the micro-batch's own size: a mean per micro-batch, and the
    # rounds add k of them
    "sum_divided_by_the_micro_batch_size": (
        """
        num_accumulation_rounds = batch_gpu_total // batch_gpu
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
        while True:
            optimizer.zero_grad(set_to_none=True)
            for round_idx in range(num_accumulation_rounds):
                images, labels = next(dataset_iterator)
                loss = loss_fn(net=net, images=images, labels=labels)
                (loss.sum() / batch_gpu).backward()
            optimizer.step()
        """,
        [(9, 9)],
    ),
    # -- optimizers known beyond a constructor of the loop's function ----------------------------------------------
    "sgd_returned_by_a_helper_of_the_file": (
        """
        def make_opt(net):
            opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
            return opt

        optimizer = make_opt(net)
        for n, (x, y) in enumerate(batches):
            criterion(net(x), y).backward()
            if n % k == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(8, 5)],
    ),
    # the definitions reaching the step: the configuration may choose the SGD (the Adam bound last does not hide it)
    "sgd_on_one_branch_of_the_configuration": (
        """
        if cfg.plain:
            optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
        else:
            optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
        for n, batch in enumerate(batches):
            net(batch).backward()
            if n % k == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(7, 5)],
    ),
    "sgd_attribute_from_a_method_in_init": (
        """
        class Runner:
            def __init__(self, net):
                self.optimizer = self.make(net)

            def make(self, net):
                return torch.optim.SGD(net.parameters(), lr=0.1)

            def fit(self, batches, k):
                for n, batch in enumerate(batches):
                    self.net(batch).backward()
                    if n % k == 0:
                        self.optimizer.step()
                        self.optimizer.zero_grad()
        """,
        [(11, 13)],
    ),
    "sgd_wrapped_by_a_framework_optimizer": (
        """
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
        optimizer = MixedPrecisionWrapper(optimizer, net, initial_scale=2**10)
        for n, batch in enumerate(batches):
            optimizer.backward(net(batch))
            if n % k == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(5, 5)],
    ),
    "sgd_family_named_class": (
        """
        optim = CudaFusedSGD(net.parameters(), lr=0.1)
        for n, batch in enumerate(batches):
            net(batch).backward()
            if n % k == 0:
                optim.step()
                optim.zero_grad()
        """,
        [(4, 5)],
    ),
    # a learning rate multiplied by the batch (the linear scaling rule) is not a summed-loss convention
    "sgd_lr_scaled_up_by_the_batch": (
        """
        optimizer = torch.optim.SGD(net.parameters(), lr=base_lr * batch_size / 256)
        for n, batch in enumerate(batches):
            net(batch).backward()
            if n % k == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(4, 5)],
    ),
    # an optimizer not known (handed in by callers of another file) is reported when the code declares the
    # window a gradient-accumulation setting: whatever optimizer its callers hand it, SGD included, that setting
    # must not change the training
    "optimizer_built_elsewhere_window_of_micro_batches": (
        """
        def fit(net, optimizer, loader, n_micro):
            for n, batch in enumerate(loader):
                net(batch).backward()
                if (n + 1) % n_micro == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        [(4, 9)],
    ),
    "optimizer_built_elsewhere_window_a_larger_batch": (
        """
        def fit(net, optimizer, loader, global_batch, batch_size):
            per_update = global_batch // batch_size
            for n, batch in enumerate(loader):
                net(batch).backward()
                if (n + 1) % per_update == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        [(5, 9)],
    ),
    "optimizer_built_elsewhere": (
        """
        def train(model, loader, optimizer, accum):
            for i, (x, y) in enumerate(loader):
                criterion(model(x), y).backward()
                if (i + 1) % accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        [(4, 9)],
    ),
    # -- frameworks that do not divide ---------------------------------------------------------------------------
    "fabric_manual_accumulation": (
        """
        fabric = L.Fabric(accelerator="cuda")
        for i, batch in enumerate(loader):
            loss = model(batch).mean()
            fabric.backward(loss)
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(5, 5)],
    ),
    "accelerator_built_without_accumulation_steps": (
        """
        accelerator = Accelerator(mixed_precision="bf16")
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for step, batch in enumerate(loader):
            loss = model(**batch).loss
            accelerator.backward(loss)
            if step % args.gradient_accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(6, 5)],
    ),
    "lightning_manual_backward": (
        """
        class LitModel(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.automatic_optimization = False

            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                loss = self.compute_loss(batch)
                self.manual_backward(loss)
                if (batch_idx + 1) % 4 == 0:
                    opt.step()
                    opt.zero_grad()
        """,
        [(10, 9)],
    ),
    # -- an inner loop over micro-batches, one step after it -------------------------------------------------
    "micro_chunks_zip": (
        """
        for x, y in loader:
            optimizer.zero_grad()
            for xc, yc in zip(x.chunk(4), y.chunk(4)):
                loss = criterion(model(xc), yc)
                loss.backward()
            optimizer.step()
        """,
        [(6, 9)],
    ),
    "micro_range_next_batch": (
        """
        def train(model, it, optimizer, accum_steps, steps):
            for step in range(steps):
                for micro in range(accum_steps):
                    x, y = next(it)
                    loss = F.cross_entropy(model(x), y)
                    loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
        """,
        [(7, 13)],
    ),
    "micro_split_in_step_helper": (
        """
        def train_step(model, batch, optimizer, scaler, micro_bs):
            for mb in torch.split(batch, micro_bs):
                scaler.scale(model(mb).mean()).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
        """,
        [(4, 9)],
    ),
    "micro_torch_chunk_enumerate": (
        """
        for batch in loader:
            for j, piece in enumerate(torch.chunk(batch, n_micro)):
                model(piece).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
        [(4, 9)],
    ),
    # -- divided by a counter that grows instead of the window's size ------------------------------------------
    "counter_divisor_with_counter_window": (
        """
        accum_step = 0
        for x, y in loader:
            accum_step += 1
            loss = criterion(model(x), y) / accum_step
            loss.backward()
            if accum_step == accum_steps:
                optimizer.step()
                optimizer.zero_grad()
                accum_step = 0
        """,
        [(5, 12)],
    ),
    "counter_divisor_with_modulo_window": (
        """
        seen = 0
        for i, (x, y) in enumerate(loader):
            seen += 1
            loss = criterion(model(x), y)
            loss = loss / seen
            loss.backward()
            if (i + 1) % grad_accum == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(6, 12)],
    ),
    "counter_divisor_in_function": (
        """
        def fit(model, loader, opt, k):
            micro = 0
            for step, batch in enumerate(loader):
                micro += 1
                (model(batch) / micro).backward()
                if step % k == 0:
                    opt.step()
                    opt.zero_grad()

        sgd = torch.optim.SGD(net.parameters(), lr=0.1)
        fit(net, data, sgd, 4)
        """,
        [(6, 10)],
    ),
    "counter_window_closed_early_and_counted_one_loop_out": (
        """
        n = 0
        for batch, last in loader:
            n += 1
            for task in tasks:
                loss = model(batch, task) / n
                loss.backward()
                if n >= accum or last:
                    optimizer.step()
                    optimizer.zero_grad()
                    n = 0
        """,
        [(6, 16)],
    ),
    "optimizer_wrapper_named_like_a_scheduler": (
        """
        class Stepper:
            def __init__(self, optimizer):
                self.optimizer = optimizer

            def step(self):
                self.optimizer.step()

            def zero_grad(self):
                self.optimizer.zero_grad()

        scheduler = Stepper(torch.optim.SGD(model.parameters(), lr=0.1))
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            if (i + 1) % accum == 0:
                scheduler.step()
                scheduler.zero_grad()
        """,
        [(15, 5)],
    ),
    "window_closed_early_never_divided": (
        """
        n = 0
        for batch, last in loader:
            n += 1
            loss = model(batch)
            loss.backward()
            if n == accum or last:
                optimizer.step()
                optimizer.zero_grad()
                n = 0
        """,
        [(6, 5)],
    ),
    # -- the window's condition computed ahead of its `if` ---------------------------------------------------------
    "window_flag_computed_ahead": (
        """
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            is_step = (i + 1) % accum_steps == 0
            if is_step:
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(4, 5)],
    ),
    "window_flag_with_last_batch_in_a_method": (
        """
        class Trainer:
            def fit(self, loader):
                for step, batch in enumerate(loader):
                    self.model(batch).loss.backward()
                    sync = (step + 1) % self.grad_accum == 0 or step == len(loader) - 1
                    if sync:
                        self.optimizer.step()
                        self.optimizer.zero_grad()
        """,
        [(5, 13)],
    ),
    "window_flag_before_the_backward": (
        """
        def train(model, loader, optimizer, accumulate):
            for i, batch in enumerate(loader):
                update = (i + 1) % accumulate == 0
                model(batch).backward()
                if update:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        [(5, 9)],
    ),
    "script": (
        """
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(4, 5)],
    ),
    "function_args_attr": (
        """
        def train(args, model, loader, optimizer):
            for step, batch in enumerate(loader):
                outputs = model(**batch)
                outputs.loss.backward()
                if step % args.gradient_accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        [(5, 9)],
    ),
    "trainer_method": (
        """
        class Trainer:
            def train_epoch(self):
                for i, batch in enumerate(tqdm(self.loader)):
                    loss = self.criterion(self.model(batch.x), batch.y)
                    loss.backward()
                    if (i + 1) % self.accum == 0:
                        self.optimizer.step()
                        self.optimizer.zero_grad()
        """,
        [(6, 13)],
    ),
    "amp_scaler": (
        """
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for i, (x, y) in enumerate(loader):
            with torch.autocast("cuda"):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            if (i + 1) % 4 == 0:
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
        """,
        [(6, 5)],
    ),
    "nested_epochs_literal": (
        """
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for epoch in range(epochs):
            for it, (x, y) in enumerate(zip(xs, ys)):
                l = F.nll_loss(net(x), y)
                l.backward()
                if it % 8 == 7:
                    opt.step()
                    opt.zero_grad()
        """,
        [(6, 9)],
    ),
    "while_counter": (
        """
        step = 0
        while step < total_steps:
            loss = model(next(it)).loss
            loss.backward()
            step += 1
            if step % grad_accum == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(5, 5)],
    ),
    "divided_by_other_thing": (
        """
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / x.size(0)
            loss.backward()
            if (i + 1) % k == 0 or i + 1 == len(loader):
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(5, 5)],
    ),
    "lightning_manual": (
        """
        class M(LightningModule):
            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                for i, micro in enumerate(batch):
                    loss = self.compute(micro)
                    self.manual_backward(loss)
                    if (i + 1) % N == 0:
                        opt.step()
                        opt.zero_grad()

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.1)
        """,
        [(7, 13)],
    ),
    "gan_generator_accum": (
        """
        for i, real in enumerate(loader):
            g_loss = adv_loss(netD(netG(z)), ones)
            g_loss.backward()
            if (i + 1) % accumulate == 0:
                optimizerG.step()
                optimizerG.zero_grad()
        """,
        [(4, 5)],
    ),
    "running_counter_guard": (
        """
        n = 0
        for x, y in loader:
            loss = crit(model(x), y)
            loss.backward()
            n += 1
            if n == accum_steps:
                optimizer.step()
                optimizer.zero_grad()
                n = 0
        """,
        [(5, 5)],
    ),
    "running_counter_guard_at_least": (
        """
        def train(model, loader, optimizer, cfg):
            seen = 0
            for batch in loader:
                model(batch).loss.backward()
                seen += 1
                if seen >= cfg.accumulate:
                    optimizer.step()
                    optimizer.zero_grad()
                    seen = 0
        """,
        [(5, 9)],
    ),
    "running_counter_on_self": (
        """
        class Trainer:
            def fit(self, loader):
                self.micro = 0
                for x, y in loader:
                    loss = self.crit(self.model(x), y)
                    self.scaler.scale(loss).backward()
                    self.micro += 1
                    if self.micro == self.grad_accum:
                        self.scaler.step(self.optimizer)
                        self.scaler.update()
                        self.optimizer.zero_grad()
                        self.micro = 0
        """,
        [(7, 13)],
    ),
    # an Adam of the file whose own `step()` clips the gradients (BERT's optimizer, `max_grad_norm` by default): the
    # clipping sees the summed window's size, so the window's sum is not the mean's update
    "adam_of_the_file_that_clips_in_its_step": (
        """
        import torch
        from torch.nn.utils import clip_grad_norm_

        class BertAdam(torch.optim.Optimizer):
            def __init__(self, params, lr, max_grad_norm=1.0):
                super().__init__(params, dict(lr=lr, max_grad_norm=max_grad_norm))

            def step(self, closure=None):
                for group in self.param_groups:
                    for p in group["params"]:
                        if p.grad is not None and group["max_grad_norm"] > 0:
                            clip_grad_norm_(p, group["max_grad_norm"])

        def train(model, loader, args):
            optimizer = BertAdam(model.parameters(), lr=args.lr)
            for step, (x, y) in enumerate(loader):
                loss = model(x, y)
                loss.backward()
                if (step + 1) % args.gradient_accumulation_steps == 0:
                    optimizer.step()
                    model.zero_grad()
        """,
        [(19, 9)],
    ),
    # the window closed by an early `continue` (Fabric's recipe): the step runs only every k-th iteration
    "window_closed_by_continue": (
        """
        def train(model, loader, optimizer, cfg):
            steps = 0
            for batch in loader:
                accumulating = steps % cfg.gradient_accumulation_steps != 0
                steps += 1
                loss = model(**batch).loss
                loss.backward()
                if accumulating:
                    continue
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(8, 9)],
    ),
    # one term divided by the window, the other not: the undivided term adds up k times
    "only_one_term_divided": (
        """
        import torch

        def train(model, loader, criterion, args):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for i, (x, y) in enumerate(loader):
                out = model(x)
                loss = criterion(out, y) + out.pow(2).mean() / args.accumulation_steps
                loss.backward()
                if (i + 1) % args.accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        [(9, 9)],
    ),
    # the window's count multiplies one term where it divides the others
    "term_multiplied_by_the_window_that_divides_the_others": (
        """
        def optimize(self, losses, criteria):
            total = 0
            for name, loss in losses.items():
                if isinstance(loss, dict):
                    for part in loss.values():
                        total += part * self.accum_iters
                else:
                    total += loss / self.accum_iters
            self.scaler.scale(total).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        """,
        [(7, 26)],
    ),
}

NEGATIVE = {
    "summed_micro_batch_losses_divided_by_the_full_batch": """
        crit = nn.CrossEntropyLoss(reduction="sum")

        def train(model, loader, opt, micro):
            for x, y in loader:
                opt.zero_grad()
                for xs, ys in zip(x.split(micro), y.split(micro)):
                    loss = crit(model(xs), ys) / len(x)
                    loss.backward()
                opt.step()
        """,
    "summed_micro_batch_losses_divided_at_the_backward": """
        crit = nn.CrossEntropyLoss(reduction="sum")

        def train(model, loader, opt, micro):
            for x, y in loader:
                opt.zero_grad()
                n = x.size(0)
                for j in range(0, n, micro):
                    loss = crit(model(x[j:j + micro]), y[j:j + micro])
                    (loss / n).backward()
                opt.step()
        """,
    "divided_with_the_div_method": """
        for i, (x, y) in enumerate(loader):
            criterion(model(x), y).div(grad_steps).backward()
            if (i + 1) % grad_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "divided_with_torch_div": """
        for i, (x, y) in enumerate(loader):
            loss = torch.div(criterion(model(x), y), grad_steps)
            loss.backward()
            if (i + 1) % grad_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "window_flag_divided": """
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / accum_steps
            loss.backward()
            is_step = (i + 1) % accum_steps == 0
            if is_step:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "flag_from_a_call_is_not_a_window": """
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            is_step = should_step(i)
            if is_step:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "flag_rebound_on_another_branch": """
        for i, (x, y) in enumerate(loader):
            criterion(model(x), y).backward()
            if warmup:
                ready = True
            else:
                ready = (i + 1) % k == 0
            if ready:
                optimizer.step()
                optimizer.zero_grad()
        """,
    # the window is cleared before its last backward (TL006's): dividing the loss would shrink the step further
    "window_cleared_before_its_last_backward": """
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            if (i + 1) % k == 0:
                optimizer.zero_grad()
            loss.backward()
            if (i + 1) % k == 0:
                optimizer.step()
        """,
    "scheduler_class_that_only_sets_the_rate": """
        class Warmup:
            def __init__(self, optimizer):
                self.optimizer = optimizer

            def step(self):
                for group in self.optimizer.param_groups:
                    group["lr"] = group["lr"] * 0.9

        scheduler = Warmup(optimizer)
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            if (i + 1) % accum == 0:
                scheduler.step()
        """,
    # Adam divides by the running gradient magnitude: k summed mean gradients give the same update as their mean
    # -- optimizers not known, or whose learning rate expects a sum -------------------------------------------------
    # the optimizer is handed in by a caller of another file (an Adam there, as likely as an SGD), and the window
    # is the batch assembled one sample per iteration, not an accumulation setting: nothing says the sum matters
    "unknown_optimizer_window_is_the_batch": """
        def train_one_by_one(net, optimizer, samples, batch_size):
            optimizer.zero_grad()
            for n, (g, label) in enumerate(samples):
                loss = net.loss(net(g), label)
                loss.backward()
                if not (n % batch_size):
                    optimizer.step()
                    optimizer.zero_grad()
        """,
    "unknown_optimizer_window_a_fraction_of_the_batch": """
        def fit(net, optimizer, loader, batch_size):
            every = batch_size // 4
            for n, batch in enumerate(loader):
                net(batch).backward()
                if (n + 1) % every == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
    "unknown_class_window_not_declared": """
        opt = Shampoo(net.parameters(), lr=0.01)
        for n, batch in enumerate(batches):
            net(batch).backward()
            if n % k == 0:
                opt.step()
                opt.zero_grad()
        """,
    # the learning rate divided by the batch: a loss summed over the batch by design (Darknet's convention), each
    # optimizer of the configuration built so
    "lr_divided_by_the_batch": """
        if cfg.optimizer == "adam":
            optimizer = torch.optim.Adam(net.parameters(), lr=cfg.lr / cfg.batch, weight_decay=cfg.decay)
        else:
            optimizer = torch.optim.SGD(net.parameters(), lr=cfg.lr / cfg.batch, momentum=0.9)
        for n, (x, y) in enumerate(batches):
            loss = summed_loss(net(x), y)
            loss.backward()
            if n % cfg.subdivisions == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "lr_divided_by_the_window_through_a_name": """
        lr = base_lr / accum_steps
        optimizer = torch.optim.SGD(net.parameters(), lr)
        for n, batch in enumerate(batches):
            net(batch).backward()
            if n % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "adam_handed_back_by_a_mixed_precision_call": """
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
        net, optimizer = amp.initialize(net, optimizer, opt_level="O1")
        for n, batch in enumerate(batches):
            net(batch).backward()
            if n % k == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "adamw_bound_after_none": """
        def main(cfg):
            optimizer = None
            if cfg.train:
                optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
            for n, batch in enumerate(batches):
                net(batch).backward()
                if n % k == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
    "adam_attribute_from_a_method_in_init": """
        class Runner:
            def __init__(self, net):
                self.optimizer = self.make(net)

            def make(self, net):
                return torch.optim.Adam(net.parameters(), lr=1e-3)

            def fit(self, batches, k):
                for n, batch in enumerate(batches):
                    self.net(batch).backward()
                    if n % k == 0:
                        self.optimizer.step()
                        self.optimizer.zero_grad()
        """,
    "adam_returned_by_a_helper_of_the_file": """
        def make_opt(net):
            return torch.optim.Adam(net.parameters(), lr=3e-4)

        optimizer = make_opt(net)
        for n, (x, y) in enumerate(batches):
            criterion(net(x), y).backward()
            if n % grad_accum == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    # a framework optimizer's own backward, on an Adam-family optimizer (named by its family) that it wraps
    "adam_wrapped_by_a_framework_optimizer": """
        optimizer = OffloadAdam(grouped_parameters, lr=args.learning_rate)
        optimizer = MixedPrecisionWrapper(optimizer, net, initial_scale=2**10)
        for step, batch in enumerate(loader):
            optimizer.backward(net(**batch)["loss"])
            if step % args.gradient_accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "lightning_optimizers_from_configure_optimizers_adam": """
        class M(LightningModule):
            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                for i, micro in enumerate(batch):
                    self.manual_backward(self.compute(micro))
                    if (i + 1) % accum == 0:
                        opt.step()
                        opt.zero_grad()

            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters(), lr=1e-4)
        """,
    "adamw_without_clipping": """
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=2e-4)
        for step, batch in enumerate(loader):
            loss = model(**batch).loss
            loss.backward()
            if step % gradient_accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    # microsoft/LoRA's eli5_utils: the epoch function steps the optimizer it is handed, and the file's one caller
    # builds it as AdamW, with nothing clipping: the summed window changes nothing AdamW does
    "optimizer_handed_by_the_caller_adamw": """
        def train_epoch(model, loader, optimizer, scheduler, args):
            for step, batch in enumerate(loader):
                loss = model(**batch)[0]
                loss.backward()
                if step % args.backward_freq == 0:
                    optimizer.step()
                    scheduler.step()
                    model.zero_grad()

        def train(model, loader, args):
            s2s_optimizer = AdamW(model.parameters(), lr=args.learning_rate, eps=1e-8)
            s2s_scheduler = get_linear_schedule_with_warmup(s2s_optimizer, 400, 10000)
            for e in range(args.num_epochs):
                train_epoch(model, loader, s2s_optimizer, s2s_scheduler, args)
        """,
    # Hugging Face's Trainer (as vendored by microsoft/LoRA): `self.deepspeed` is the DeepSpeedEngine, whose backward
    # divides by the accumulation steps itself
    "trainer_deepspeed_engine_backward": """
        class Trainer:
            def training_step(self, model, inputs):
                loss = self.compute_loss(model, inputs)
                if self.args.gradient_accumulation_steps > 1 and not self.deepspeed:
                    loss = loss / self.args.gradient_accumulation_steps
                if self.deepspeed:
                    loss = self.deepspeed.backward(loss)
                else:
                    loss.backward()
                return loss.detach()

            def train(self, loader):
                for step, inputs in enumerate(loader):
                    self.training_step(self.model, inputs)
                    if (step + 1) % self.args.gradient_accumulation_steps == 0:
                        if self.deepspeed:
                            self.deepspeed.step()
                        else:
                            self.optimizer.step()
                        self.model.zero_grad()
        """,
    # NVlabs/edm: each micro-batch's summed loss is divided by the window's total batch, of which the number of
    # rounds is a quotient: the rounds add up to the mean over the window
    "sum_divided_by_the_window_total": """
        batch_gpu_total = batch_size // world_size
        num_accumulation_rounds = batch_gpu_total // batch_gpu
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
        while True:
            optimizer.zero_grad(set_to_none=True)
            for round_idx in range(num_accumulation_rounds):
                images, labels = next(dataset_iterator)
                loss = loss_fn(net=net, images=images, labels=labels)
                loss.sum().mul(loss_scaling / batch_gpu_total).backward()
            optimizer.step()
        """,
    "fused_adam_micro_loop": """
        optimizer = FusedAdam(model.parameters(), lr=args.learning_rate)
        for i in range(steps):
            for j in range(args.grads_accumulated):
                loss = criterion(model(batches[i * args.grads_accumulated + j]))
                scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        """,
    # the gradients are rescaled by hand before the step (fairseq style: divided by the samples of the window)
    "grads_multiplied_before_step": """
        for batch, k in zip(loader, cycle(range(update_freq))):
            loss = criterion(model, batch)
            loss.backward()
            if (k + 1) % update_freq == 0:
                optim.multiply_grads(world_size / sample_size)
                optim.step()
                optim.zero_grad()
        """,
    "grads_divided_in_place": """
        for i, (x, y) in enumerate(loader):
            criterion(model(x), y).backward()
            if (i + 1) % k == 0:
                for p in model.parameters():
                    p.grad.div_(k)
                opt.step()
                opt.zero_grad()
        """,
    "accelerator_built_with_accumulation_steps": """
        accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
        for step, batch in enumerate(loader):
            loss = model(**batch).loss
            accelerator.backward(loss)
            if step % args.gradient_accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "accelerator_from_elsewhere": """
        def train(accelerator, model, loader, optimizer, k):
            for step, batch in enumerate(loader):
                accelerator.backward(model(**batch).loss)
                if step % k == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
    "fabric_divided": """
        for i, batch in enumerate(loader):
            loss = model(batch).mean() / accum
            fabric.backward(loss)
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "lightning_divided": """
        class LitModel(LightningModule):
            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                loss = self.compute_loss(batch) / self.accum
                self.manual_backward(loss)
                if (batch_idx + 1) % self.accum == 0:
                    opt.step()
                    opt.zero_grad()
        """,
    "lightning_steps_every_batch": """
        class LitModel(LightningModule):
            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                opt.zero_grad()
                self.manual_backward(self.compute_loss(batch))
                opt.step()
        """,
    "micro_divided_by_steps": """
        for step in range(steps):
            for micro in range(accum_steps):
                x, y = next(it)
                loss = F.cross_entropy(model(x), y) / accum_steps
                loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        """,
    "micro_divided_by_len_of_split": """
        for batch in loader:
            pieces = torch.split(batch, micro_bs)
            for mb in torch.split(batch, micro_bs):
                (model(mb).mean() / len(pieces)).backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
    # a loop over tasks or heads, not micro-batches: the sum of the task losses is the objective
    "inner_loop_over_heads": """
        for batch in loader:
            optimizer.zero_grad()
            for head in heads:
                head(model(batch)).backward()
            optimizer.step()
        """,
    # a step per pass of the inner loop: a critic trained n_critic times, not accumulation
    "inner_loop_steps_each_pass": """
        for batch in loader:
            for _ in range(n_critic):
                d_loss = critic_loss(next(it))
                d_loss.backward()
                opt_d.step()
                opt_d.zero_grad()
        """,
    "divided_by_the_window_not_the_counter": """
        accum_step = 0
        for x, y in loader:
            accum_step += 1
            loss = criterion(model(x), y) / accum_steps
            loss.backward()
            if accum_step == accum_steps:
                optimizer.step()
                optimizer.zero_grad()
                accum_step = 0
        """,
    # the author manages the loss's scale by hand: a loss multiplied on its way (`* bs` for a sum over samples,
    # `*= world_size` to undo DDP's averaging) is meant to add up across micro-batches
    "loss_scaled_by_hand": """
        for i, (imgs, targets) in enumerate(loader):
            loss, items = compute_loss(model(imgs), targets)
            if rank != -1:
                loss *= world_size
            scaler.scale(loss).backward()
            if i % accumulate == 0:
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
        """,
    "loss_rescaled_by_rebinding": """
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss = loss * x.shape[0]
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "divided_inline": """
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "divided_augassign": """
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss /= args.accum
            loss.backward()
            if (i + 1) % args.accum == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "divided_in_backward": """
        for i, (x, y) in enumerate(loader):
            (criterion(model(x), y) / k).backward()
            if (i + 1) % k == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "accelerate_accumulate": """
        for step, batch in enumerate(loader):
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                if step % 4 == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """,
    "deepspeed_engine": """
        for step, batch in enumerate(loader):
            loss = model_engine(batch)
            model_engine.backward(loss)
            if step % gas == 0:
                model_engine.step()
        """,
    "loss_function_divides": """
        def compute_loss(model, batch):
            return criterion(model(batch.x), batch.y) / GRAD_ACCUM

        for i, batch in enumerate(loader):
            loss = compute_loss(model, batch)
            loss.backward()
            if (i + 1) % GRAD_ACCUM == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "step_every_iteration_logging_guard": """
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if i % 100 == 0:
                print(loss.item())
        """,
    "backward_under_same_guard": """
        for i, (x, y) in enumerate(loader):
            total = total + criterion(model(x), y)
            if i % k == 0:
                (total / k).backward()
                optimizer.step()
                optimizer.zero_grad()
        """,
    "scale_factor_multiplied": """
        scale = 1.0 / accum_steps
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) * scale
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "eval_under_modulo_no_step": """
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if i % eval_every == 0:
                evaluate(model)
        """,
    "gan_generator_every_n_critic_steps": """
        for i, (real, _) in enumerate(loader):
            optimizer_D.zero_grad()
            d_loss = -critic(real).mean() + critic(generator(noise()).detach()).mean()
            d_loss.backward()
            optimizer_D.step()
            if i % n_critic == 0:
                optimizer_G.zero_grad()
                g_loss = -critic(generator(noise())).mean()
                g_loss.backward()
                optimizer_G.step()
        """,
    "running_counter_with_divided_loss": """
        n = 0
        for x, y in loader:
            loss = crit(model(x), y) / accum_steps
            loss.backward()
            n += 1
            if n == accum_steps:
                optimizer.step()
                optimizer.zero_grad()
                n = 0
        """,
    "counter_that_is_never_reset_is_not_a_window": """
        n = 0
        for x, y in loader:
            crit(model(x), y).backward()
            n += 1
            if n == warmup_steps:
                optimizer.step()
            optimizer.zero_grad()
        """,
    # an Adam of the file whose `step()` does not clip: scale-invariant, the sum makes the mean's update
    "adam_of_the_file_that_does_not_clip": """
        import torch

        class PlainAdam(torch.optim.Optimizer):
            def __init__(self, params, lr):
                super().__init__(params, dict(lr=lr))

            def step(self, closure=None):
                for group in self.param_groups:
                    for p in group["params"]:
                        p.data.add_(p.grad.sign(), alpha=-group["lr"])

        def train(model, loader, args):
            optimizer = PlainAdam(model.parameters(), lr=args.lr)
            for step, (x, y) in enumerate(loader):
                loss = model(x, y)
                loss.backward()
                if (step + 1) % args.gradient_accumulation_steps == 0:
                    optimizer.step()
                    model.zero_grad()
        """,
    # the same shapes with the window honoured: divided after a `continue` window, every term divided (or a number
    # added), and a product by the window with no term divided by it
    "windows_divided_whole": """
        import torch

        def train(model, loader, optimizer, cfg):
            steps = 0
            for batch in loader:
                accumulating = steps % cfg.gradient_accumulation_steps != 0
                steps += 1
                loss = model(**batch).loss / cfg.gradient_accumulation_steps
                loss.backward()
                if accumulating:
                    continue
                optimizer.step()
                optimizer.zero_grad()

        def train_sgd(model, loader, criterion, args):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for i, (x, y) in enumerate(loader):
                out = model(x)
                loss = criterion(out, y) / args.accumulation_steps + out.pow(2).mean() / args.accumulation_steps + 1.0
                loss.backward()
                if (i + 1) % args.accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()

        def scaled(self, parts):
            total = 0
            for part in parts:
                total += part * self.accum_iters
            return total
        """,
}


@pytest.mark.parametrize("name", POSITIVE)
def test_positive(name):
    src, expected = POSITIVE[name]
    assert findings(src, "TL005") == expected


@pytest.mark.parametrize("name", NEGATIVE)
def test_negative(name):
    assert findings(NEGATIVE[name], "TL005") == []


def test_fix_divides_tensor_backward():
    out = fixed(POSITIVE["script"][0], "TL005")
    assert "    (loss / accum_steps).backward()\n" in out
    assert findings(out, "TL005") == []
    assert fixed(out, "TL005") == out


def test_fix_divides_inside_scaler():
    out = fixed(POSITIVE["amp_scaler"][0], "TL005")
    assert "scaler.scale(loss / 4).backward()" in out


def test_fix_parenthesises_attribute_divisor_and_keeps_sum():
    src = """
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, batch in enumerate(loader):
        (a + b).backward()
        if step % args.k == 0:
            optimizer.step()
    """
    assert "((a + b) / args.k).backward()" in fixed(src, "TL005")


def test_fix_divides_micro_batch_loss():
    out = fixed(POSITIVE["micro_range_next_batch"][0], "TL005")
    assert "            (loss / accum_steps).backward()\n" in out
    assert findings(out, "TL005") == []


def test_fix_divides_inside_framework_backward():
    out = fixed(POSITIVE["fabric_manual_accumulation"][0], "TL005")
    assert "    fabric.backward(loss / accum)\n" in out
    out = fixed(POSITIVE["lightning_manual_backward"][0], "TL005")
    assert "self.manual_backward(loss / 4)" in out


def test_message():
    """The full text of the finding, so a change of wording is seen here."""
    assert messages(POSITIVE["adam_with_clipping"][0], "TL005") == [(
        5, 5,
        "`loss.backward()` runs every iteration but the optimizer steps every `accum` iterations: "
        "gradients of `accum` micro-batches add up, an update `accum`x too large; divide the loss by "
        "`accum`",
    )]


def test_a_backward_served_by_its_own_step_is_outside_the_window():
    """A temperature's loss back-propagated and stepped by its own optimizer right away, every iteration, beside
    a main loss accumulated (and divided) over a window: only the main backward belongs to the window."""
    src = """
        for i, (x, y) in enumerate(loader):
            alpha_loss = -(log_alpha * (logp(x).detach() + target)).mean()
            alpha_loss.backward()
            alpha_opt.step()
            alpha_opt.zero_grad()
            loss = criterion(model(x), y) / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    assert findings(src, "TL005") == []
    undivided = src.replace("criterion(model(x), y) / accum_steps", "criterion(model(x), y)")
    assert findings(undivided, "TL005") == [(8, 5)]


RESCALED = """
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for batch_idx, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        for p in {params}:
            p.grad.data *= {factor}
        if (batch_idx + 1) % args.accu_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
"""


def test_gradients_rescaled_by_the_window_by_hand():
    src = RESCALED.format(params="model.parameters()", factor="1.0 / args.accu_steps")
    assert findings(src, "TL005") == []


def test_gradients_rescaled_for_another_purpose_leave_the_window_summed():
    """`p.grad *= 1 / loss_ratio` on one module's parameters undoes a loss weight; it does not divide the window."""
    src = RESCALED.format(params="center_loss.parameters()", factor="(1.0 / args.loss_ratio)")
    assert findings(src, "TL005") == [(5, 5)]


def test_gradients_returned_by_autograd_grad_do_not_add_up():
    src = """
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for i, (x, y) in enumerate(loader):
            weights = torch.autograd.grad(meta_loss(x, eps), eps)[0]
            loss = (weights * criterion(model(x), y)).sum() / args.accu_steps
            loss.backward()
            if (i + 1) % args.accu_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    assert findings(src, "TL005") == []


_DECAY_FROM_DEFAULTS = """
        def defaults():
            args = types.SimpleNamespace()
            args.lr = 1e-4
            args.weight_decay = {decay}
            args.accum = 16
            return args

        def train(model, args, loader):
            optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                if (i + 1) % args.accum == 0:
                    optimizer.step()
                    optimizer.zero_grad()
        """


def test_adam_whose_weight_decay_is_zero_in_every_assignment_is_scale_invariant():
    """`args.weight_decay = 0.00` is the only value the file gives it: no coupled decay sees the window's size (the
    function that sets it is read even where the file is checked pruned)."""
    assert findings(_DECAY_FROM_DEFAULTS.format(decay="0.00"), "TL005") == []


def test_adam_whose_weight_decay_is_set_elsewhere_to_a_value_is_reported():
    assert findings(_DECAY_FROM_DEFAULTS.format(decay="1e-4"), "TL005") == [(13, 9)]


SETTING_BRANCHES = """
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for idx, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        if cfg.ACCUMULATION_STEPS > 1:
            loss = loss{divided}
            loss.backward()
            if (idx + 1) % cfg.ACCUMULATION_STEPS == 0:
                optimizer.step()
                optimizer.zero_grad()
        else:
            optimizer.zero_grad()
            if cfg.AMP:
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
            else:
                loss.backward()
            {last}
"""


def test_the_branch_without_accumulation_steps_its_own_backwards():
    """The else-branch of an accumulation setting clears, back-propagates on one of two paths (mixed precision or
    not) and steps after both, every iteration: its backwards are no window's; only the accumulating branch is."""
    divided = " / cfg.ACCUMULATION_STEPS"
    assert findings(SETTING_BRANCHES.format(divided=divided, last="optimizer.step()"), "TL005") == []
    assert findings(SETTING_BRANCHES.format(divided="", last="optimizer.step()"), "TL005") == [(7, 9)]
    # a step under a condition of its own in the else-branch leaves its backwards in a window
    periodic = "if (idx + 1) % cfg.ACCUMULATION_STEPS == 0: optimizer.step()"
    assert findings(SETTING_BRANCHES.format(divided=divided, last=periodic), "TL005") == [(15, 17), (17, 13)]
