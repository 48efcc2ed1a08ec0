"""TL007 graph-attached loss kept across iterations only for logging."""

import json
import textwrap

import pytest

from tests.helpers import findings, fixed, lint_in_process, messages

POSITIVE = {
    # `method.backward(loss)`: an object that back-propagates the loss it is handed, so the loss carries a graph
    "loss_back_propagated_by_an_object_then_summed": (
        """
        def train(method, loader):
            avg_loss = 0.0
            for x, y in loader:
                loss, preds = method.forward(x, y)
                loss = loss.mean()
                method.backward(loss)
                avg_loss += loss
            return avg_loss / len(loader)
        """,
        [(8, 9)],
    ),
    # a logger whose `log(**values)` appends each keyword's value to a list of `self` (through `setdefault`)
    "logger_keeping_what_it_is_given_by_keyword": (
        """
        class Logger:
            def __init__(self):
                self.logs = {}

            def log(self, **values):
                for k, v in values.items():
                    self.logs.setdefault(k, []).append(v)

        logger = Logger()
        for x, y in loader:
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            logger.log(loss=loss)
        """,
        [(16, 5)],
    ),
    # every entry of the output dict, `out["loss"]` among them, added into a running dict (no fix: other entries
    # may be plain numbers, on which `.detach()` raises)
    "every_entry_of_an_output_dict_whose_loss_entry_is_back_propagated": (
        """
        running = {}
        for x, y in loader:
            out = model(x, y)
            loss = out["loss"]
            opt.zero_grad()
            loss.backward()
            opt.step()
            for k, v in out.items():
                running[k] = running.get(k, 0) + v
        """,
        [(10, 9)],
    ),
    "forward_keeps_each_activation_in_a_list_of_the_module": (
        """
        class Probe(nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = nn.Linear(8, 8)
                self.maps = []

            def forward(self, x):
                h = self.layer(x).relu()
                self.maps.append(h)
                return h.mean()

        net = Probe()
        for x in loader:
            optimizer.zero_grad()
            loss = net(x)
            loss.backward()
            optimizer.step()
        """,
        [(10, 9)],
    ),
    "forward_adds_a_penalty_into_the_module_across_calls": (
        """
        class Sparse(nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = nn.Linear(8, 8)
                self.l1_seen = 0

            def forward(self, x):
                h = self.layer(x)
                self.l1_seen += h.abs().mean()
                return h.sum()

        net = Sparse()
        for x in loader:
            optimizer.zero_grad()
            net(x).backward()
            optimizer.step()
        print(net.l1_seen)
        """,
        [(10, 9)],
    ),
    "running_total_returned_by_a_helper_of_the_file": (
        """
        def accumulate(total, value):
            return total + value

        running = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = crit(model(x), y)
            loss.backward()
            optimizer.step()
            running = accumulate(running, loss)
        print(running)
        """,
        [(11, 5)],
    ),
    "moving_average_kept_by_a_helper_through_its_own_binding": (
        """
        def smooth(avg, new, beta=0.98):
            avg = beta * avg
            avg = avg + (1 - beta) * new
            return avg

        ema = 0
        for x, y in loader:
            optimizer.zero_grad()
            loss = crit(model(x), y)
            loss.backward()
            optimizer.step()
            ema = smooth(ema, loss)
        print(ema)
        """,
        [(13, 5)],
    ),
    "dict_entry_added_to_through_get": (
        """
        log = {}
        for x, y in loader:
            optimizer.zero_grad()
            loss = crit(model(x), y)
            loss.backward()
            optimizer.step()
            log["loss"] = log.get("loss", 0) + loss
        print(log)
        """,
        [(8, 5)],
    ),
    "ignite_handler_keeps_the_attached_output_of_every_iteration": (
        """
        from ignite.engine import Engine, Events

        def make(model, optimizer, criterion, loader):
            def update(engine, batch):
                x, y = batch
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                return loss

            trainer = Engine(update)
            losses = []

            @trainer.on(Events.ITERATION_COMPLETED)
            def log(engine):
                losses.append(engine.state.output)

            trainer.run(loader, max_epochs=3)
            return losses
        """,
        [(18, 9)],
    ),
    "lightning_step_appends_a_record_of_its_output_cleared_only_at_epoch_end": (
        """
        class Model(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.outs = []

            def training_step(self, batch, batch_idx):
                x, y = batch
                out = self(x)
                loss = F.mse_loss(out, y)
                self.outs.append({"pred": out, "y": y})
                return loss

            def on_train_epoch_end(self):
                self.outs.clear()
        """,
        [(11, 9)],
    ),
    "total_reset_only_at_each_logging_interval": (
        """
        def fit(net, batches, opt, log_every):
            shown = 0.0
            for i, (x, y) in enumerate(batches):
                opt.zero_grad()
                loss = F.mse_loss(net(x), y)
                loss.backward()
                opt.step()
                shown += loss
                if i % log_every == 0:
                    print(shown / log_every)
                    shown = 0.0
        """,
        [(9, 9)],
    ),
    "epoch_total_over_batches_a_sampler_draws": (
        """
        def fit(net, sampler, opt, epochs, n_batches):
            for epoch in range(epochs):
                total = 0.0
                for _ in range(n_batches):
                    x, y = sampler.draw()
                    opt.zero_grad()
                    loss = F.mse_loss(net(x), y)
                    loss.backward()
                    opt.step()
                    total += loss
                print(epoch, total / n_batches)
        """,
        [(11, 13)],
    ),
    "epoch_total_over_batches_drawn_with_next": (
        """
        def fit(net, batches, opt, epochs, steps):
            for epoch in range(epochs):
                seen = iter(batches)
                total = 0
                for _ in range(steps):
                    x, y = next(seen)
                    opt.zero_grad()
                    loss = F.mse_loss(net(x), y)
                    loss.backward()
                    opt.step()
                    total += loss
                print(epoch, total / steps)
        """,
        [(12, 13)],
    ),
    "outputs_grown_by_concatenation": (
        """
        def fit(net, batches, opt):
            seen = torch.empty(0)
            for x, y in batches:
                opt.zero_grad()
                out = net(x)
                F.mse_loss(out, y).backward()
                opt.step()
                seen = torch.cat([seen, out], dim=0)
            return seen
        """,
        [(9, 9)],
    ),
    "moving_average_seeded_in_a_conditional_expression": (
        """
        def fit(net, batches, opt):
            shown = None
            for x, y in batches:
                opt.zero_grad()
                loss = F.mse_loss(net(x), y)
                loss.backward()
                opt.step()
                shown = loss if shown is None else 0.98 * shown + 0.02 * loss
                print(f"{float(shown):.3f}")
        """,
        [(9, 9)],
    ),
    # -- a tuple bound to a name, unpacked after --------------------------------------------------------------------
    "tuple_result_bound_then_unpacked": (
        """
        def compute(model, x, y):
            out = model(x)
            return F.mse_loss(out, y), len(y)

        def train(model, loader, optimizer):
            seen = []
            for x, y in loader:
                optimizer.zero_grad()
                res = compute(model, x, y)
                err, count = res
                F.l1_loss(model(x), y).backward()
                optimizer.step()
                seen.append(err)
            print(seen)
        """,
        [(14, 9)],
    ),
    # -- loss parts in a dict, iterated with .items() or .values() ---------------------------------------------------
    "dict_parts_iterated_with_items": (
        """
        def train(model, loader, optimizer):
            logs = {"ce": 0.0, "l1": 0.0}
            for x, y in loader:
                optimizer.zero_grad()
                out = model(x)
                parts = {"ce": F.cross_entropy(out, y), "l1": out.abs().mean()}
                sum(parts.values()).backward()
                optimizer.step()
                for name, part in parts.items():
                    logs[name] += part
            return {k: v.item() / len(loader) for k, v in logs.items()}
        """,
        [(11, 13)],
    ),
    "dict_parts_stored_one_by_one_iterated_with_values": (
        """
        history = []
        for x, y in loader:
            optimizer.zero_grad()
            out = model(x)
            losses = {}
            losses["mse"] = F.mse_loss(out, y)
            losses["reg"] = 0.01 * out.pow(2).mean()
            (losses["mse"] + losses["reg"]).backward()
            optimizer.step()
            for value in losses.values():
                history.append(value)
        plt.plot(history)
        """,
        [(12, 9)],
    ),
    "dict_parts_accumulated_with_get": (
        """
        def train(model, loader, optimizer, criterion):
            logs = {}
            for x, y in loader:
                optimizer.zero_grad()
                out = model(x)
                parts = {"mse": criterion(out, y), "l1": (out - y).abs().mean()}
                loss = sum(parts.values())
                loss.backward()
                optimizer.step()
                for name, value in parts.items():
                    logs[name] = logs.get(name, 0) + value
            print({k: v.item() for k, v in logs.items()})
        """,
        [(12, 13)],
    ),
    # -- a loss returned by a module method other than forward -----------------------------------------------------
    "loss_from_a_method_that_calls_self": (
        """
        class Net(nn.Module):
            def forward(self, x):
                return self.body(x)

            def compute_loss(self, x, y):
                return F.cross_entropy(self(x), y)


        def train(loader):
            model = Net()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            running = 0
            for x, y in loader:
                optimizer.zero_grad()
                loss = model.compute_loss(x, y)
                loss.backward()
                optimizer.step()
                running += loss
            print(running.item() / len(loader))
        """,
        [(19, 9)],
    ),
    "loss_from_a_method_that_calls_a_submodule": (
        """
        class Regressor(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(8, 1)

            def loss(self, x, y):
                return F.mse_loss(self.head(x), y)


        model = Regressor()
        optimizer = torch.optim.Adam(model.parameters())
        history = []
        for x, y in loader:
            optimizer.zero_grad()
            value = model.loss(x, y)
            value.backward()
            optimizer.step()
            history.append(value)
        plt.plot(history)
        """,
        [(19, 5)],
    ),
    "training_step_of_a_module_built_in_init": (
        """
        class Net(nn.Module):
            def training_step(self, batch):
                x, y = batch
                return F.nll_loss(self(x), y)


        class Trainer:
            def __init__(self):
                self.net = Net()
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.01)

            def fit(self, loader):
                epoch_loss = 0
                for batch in loader:
                    self.opt.zero_grad()
                    loss = self.net.training_step(batch)
                    loss.backward()
                    self.opt.step()
                    epoch_loss += loss
                print(f"loss {epoch_loss.item():.3f}")
        """,
        [(20, 13)],
    ),
    "step_output_appended_after_its_loss_is_back_propagated": (
        """
        def train(module, loader, optimizer):
            outputs = []
            for i, batch in enumerate(loader):
                optimizer.zero_grad()
                output = module.training_step(batch, i)
                output["loss"].backward()
                optimizer.step()
                outputs.append(output)
            return module.training_epoch_end(outputs)
        """,
        [(9, 9)],
    ),
    "epoch_total_kept_in_a_list_that_is_plotted": (
        """
        import matplotlib.pyplot as plt

        history = []
        for epoch in range(epochs):
            running = 0.0
            for x, y in loader:
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                running += loss
            history.append(running / len(loader))
            plt.plot(history)
        """,
        [(12, 9)],
    ),
    # pyg-team/pytorch_geometric examples/rdl.py: the loss scaled in place after its backward, then added into a
    # tensor total kept for the whole epoch
    "scaled_in_place_then_accumulated": (
        """
        def train(model, loader, optimizer):
            loss_accum = torch.zeros(1, device=device).squeeze_()
            count_accum = 0
            for batch in tqdm(loader):
                optimizer.zero_grad()
                pred = model(batch)
                loss = loss_fn(pred, batch.y.float())
                loss.backward()
                optimizer.step()
                loss *= pred.size(0)
                loss_accum += loss
                count_accum += pred.size(0)
            return loss_accum.item() / count_accum
        """,
        [(12, 9)],
    ),
    # a new entry at every step: the dict holds every step's graph
    "dict_entry_per_step": (
        """
        loss_at = {}
        for step, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            loss_at[step] = loss
        """,
        [(8, 5)],
    ),
    # the same chunks kept in a list bound once, before all the batches: it holds every step's graphs
    "micro_batch_outputs_of_every_step": (
        """
        outputs = []
        for data, targets in train_loader:
            optimizer.zero_grad()
            for data_chunk, target_chunk in zip(data.chunk(4), targets.chunk(4)):
                output_chunk = model(data_chunk)
                outputs.append(output_chunk)
                loss = loss_func(output_chunk, target_chunk)
                loss.backward()
            optimizer.step()
        """,
        [(7, 9)],
    ),
    "running_loss": (
        """
        running_loss = 0.0
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            running_loss += loss
        print(running_loss / len(loader))
        """,
        [(8, 5)],
    ),
    "assign_plus": (
        """
        def train(model, loader, opt):
            total = 0
            for x, y in loader:
                loss = F.mse_loss(model(x), y)
                loss.backward()
                opt.step()
                total = total + loss
            return total
        """,
        [(8, 9)],
    ),
    "divided_as_it_accumulates": (
        """
        for epoch in range(epochs):
            epoch_loss = 0
            for data, label in train_loader:
                output = model(data)
                loss = criterion(output, label)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                epoch_loss += loss / len(train_loader)
            print(f"epoch {epoch}: {epoch_loss:.4f}")
        """,
        [(10, 9)],
    ),
    "history_append": (
        """
        history = []
        for epoch in range(10):
            for x, y in loader:
                loss = loss_fn(net(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
                history.append(loss)
        """,
        [(9, 9)],
    ),
    "outputs_append": (
        """
        outputs = []
        for x, y in loader:
            output = model(x)
            loss = criterion(output, y)
            loss.backward()
            optimizer.step()
            outputs.append(output)
        """,
        [(8, 5)],
    ),
    "stats_dict": (
        """
        stats = {"loss": 0.0}
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            stats["loss"] += loss
        """,
        [(7, 5)],
    ),
    "trainer_self_total": (
        """
        class Trainer:
            def fit(self, loader):
                for batch in loader:
                    loss = self.model(batch).loss
                    loss.backward()
                    self.optimizer.step()
                    self.epoch_loss += loss
        """,
        [(8, 13)],
    ),
    "while_loop_losses_list": (
        """
        losses = []
        step = 0
        while step < n:
            l = crit(model(xs[step]), ys[step])
            l.backward()
            opt.step()
            losses.append(l)
            step += 1
        """,
        [(8, 5)],
    ),
    "gan_logging": (
        """
        G_losses, D_losses = [], []
        for i, data in enumerate(dataloader):
            errD = criterion(netD(data), label)
            errD.backward()
            optimizerD.step()
            errG = criterion(netD(netG(noise)), label)
            errG.backward()
            optimizerG.step()
            G_losses.append(errG)
            D_losses.append(errD)
        """,
        [(10, 5), (11, 5)],
    ),
    "dict_entry_total": (
        """
        def train(model, loader, opt, crit):
            stats = {"loss": 0.0}
            for x, y in loader:
                loss = crit(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
                stats["loss"] = stats["loss"] + loss
        """,
        [(9, 9)],
    ),
    "records_holding_the_loss": (
        """
        def train(model, loader, opt, crit):
            outputs = []
            for x, y in loader:
                loss = crit(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
                outputs.append({"loss": loss, "n": len(y)})
            return outputs
        """,
        [(9, 9)],
    ),
    "records_as_tuples": (
        """
        history = []
        for step, (x, y) in enumerate(loader):
            out = model(x)
            loss = criterion(out, y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            history.append((step, loss))
        """,
        [(9, 5)],
    ),
    "helper_returns_the_attached_loss": (
        """
        class Trainer:
            def train_step(self, x, y):
                loss = self.crit(self.model(x), y)
                loss.backward()
                self.opt.step()
                self.opt.zero_grad()
                return loss

            def fit(self, loader):
                total = 0.0
                for x, y in loader:
                    total += self.train_step(x, y)
                print(total)
        """,
        [(13, 13)],
    ),
    "helper_function_losses_summed": (
        """
        def step(model, batch, opt):
            loss = model(batch).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        def fit(model, loader, opt):
            epoch_loss = 0
            for batch in loader:
                epoch_loss = epoch_loss + step(model, batch, opt)
            print(epoch_loss)
        """,
        [(12, 9)],
    ),
    "dict_entry_augmented_with_a_divided_loss": (
        """
        meters = {"train": 0.0}
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            meters["train"] += loss / len(loader)
        """,
        [(8, 5)],
    ),
    # an imported loss function, aliased: its call is the loss, not a call of a "graph tensor"
    "imported_loss_function_alias": (
        """
        from losses import my_loss

        loss_fn = my_loss
        running_loss = 0.0
        for x, y in loader:
            loss, mse, ce = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            running_loss += loss
        print(running_loss)
        """,
        [(11, 5)],
    ),
    # -- known by its use: a value back-propagated in the iteration carries a graph, whoever built it -------------
    "unresolved_method_loss_back_propagated_then_summed": (
        """
        def fit(trainer, loader, opt):
            total = 0.0
            for batch in loader:
                loss = trainer.compute(batch)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss
            return total.item() / len(loader)
        """,
        [(9, 9)],
    ),
    "divided_term_of_the_back_propagated_value": (
        """
        for epoch in range(200):
            mean_err = 0.0
            for xb, yb in loader:
                err = objective(net(xb), yb)
                opt.zero_grad()
                err.backward()
                opt.step()
                mean_err += err / len(loader)
            print(float(mean_err))
        """,
        [(9, 9)],
    ),
    "tuple_of_parts_whose_sum_is_back_propagated": (
        """
        history = []
        for batch in loader:
            parts = net.losses(batch)
            loss = sum(parts) if isinstance(parts, tuple) else parts
            loss.backward()
            opt.step()
            opt.zero_grad()
            history.append(parts)
        print(len(history))
        """,
        [(9, 5)],
    ),
    "element_of_an_unpacked_result_back_propagated": (
        """
        def run(self, loader, opt):
            epoch_nll = 0
            for batch in loader:
                nll, pred, target = self.step_task(batch)
                opt.zero_grad()
                nll.backward()
                opt.step()
                epoch_nll += nll
            return epoch_nll / len(loader)
        """,
        [(9, 9)],
    ),
    "accelerator_backward_then_kept_under_the_step_number": (
        """
        by_step = {}
        n = 0
        for batch in loader:
            out = wrapped(**batch)
            accelerator.backward(out.loss)
            optimizer.step()
            optimizer.zero_grad()
            by_step[n] = out.loss
            n += 1
        """,
        [(9, 5)],
    ),
    "scaled_backward_of_an_unresolved_loss_then_kept": (
        """
        def fit(engine, loader, opt, scaler):
            seen = []
            for batch in loader:
                with torch.autocast("cuda"):
                    loss = engine.objective(batch)
                opt.zero_grad()
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
                seen.append(loss)
            return [v.item() for v in seen]
        """,
        [(11, 9)],
    ),
    "string_format_of_the_total_is_only_display": (
        """
        total = 0.0
        for xb, yb in loader:
            err = objective(net(xb), yb)
            opt.zero_grad()
            err.backward()
            opt.step()
            total += err
        print("total: {:.4f}".format(float(total)))
        """,
        [(8, 5)],
    ),
    "total_rebound_to_numpy_before_it_is_handed_on": (
        """
        for epoch in range(n_epochs):
            running = 0.0
            for x, y in loader:
                loss = criterion(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                running += loss
            running = (running / len(loader)).detach().cpu().numpy()
            board.add(epoch, running)
        board.save(running)
        """,
        [(9, 9)],
    ),
    "tensor_buffer_filled_over_the_batches_of_a_loader": (
        """
        def train(model, loader, opt, crit):
            history = torch.zeros(len(loader))
            for i, (x, y) in enumerate(loader):
                loss = crit(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                history[i] = loss
            return history
        """,
        [(9, 9)],
    ),
    # -- what the file's own classes do with what they are given ----------------------------------------------
    "meter_of_the_file_adds_the_attached_loss_into_itself": (
        """
        class RunningMean:
            def __init__(self):
                self.total = 0
                self.n = 0

            def update(self, val, n=1):
                self.total += val * n
                self.n += n

        def train(model, loader, opt, crit):
            avg = RunningMean()
            for x, y in loader:
                loss = crit(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                avg.update(loss, len(x))
            return avg.total / avg.n
        """,
        [(18, 9)],
    ),
    # an epoch loop around a function of the file that trains (a run of its own): the run returns its summed,
    # still attached losses in a tuple, and the epoch loop keeps them in a list for a plot
    "epoch_totals_of_a_run_kept_across_epochs": (
        """
        def one_epoch(net, batches, opt, crit):
            fit, held = 0, 0
            for inp, tgt in batches:
                opt.zero_grad()
                err = crit(net(inp), tgt)
                err.backward()
                opt.step()
                fit += err.detach()
                held += crit(net(inp), tgt)
            return fit / len(batches), held / len(batches)

        def fit_all(net, batches, opt, crit, rounds):
            curve = []
            for r in range(rounds):
                a, b = one_epoch(net, batches, opt, crit)
                curve.append(b)
            plt.plot(curve)
        """,
        [(10, 9), (17, 9)],
    ),
    # a collector of the file whose `__setitem__` appends what is stored, and a meter that adds each item of the
    # list it is given (a loop over its parameter)
    "collector_and_column_meter_of_the_file": (
        """
        class Book:
            def __setitem__(self, key, value):
                self.rows[key].append(value)

        class Columns:
            def push(self, values):
                for i, v in enumerate(values):
                    self.sums[i] += v

        book = Book()
        cols = Columns()
        for inp, tgt in batches:
            err = crit(net(inp), tgt)
            err.backward()
            opt.step()
            opt.zero_grad()
            book["err"] = err
            cols.push([err.item(), err])
        """,
        [(18, 5), (19, 5)],
    ),
    # a method that back-propagates and steps once per call (a step body, called by a loop elsewhere) hands a
    # meter held by `self` a part of its loss: the part is a term of the loss a helper of the file returned with it
    "step_body_gives_a_meter_of_self_a_part_of_its_loss": (
        """
        class Meter:
            def add(self, values):
                for i, v in enumerate(values):
                    self.sums[i] += v

        class Runner:
            def __init__(self):
                self.meter = Meter()

            def losses(self, inp, tgt):
                first = self.crit(self.net(inp), tgt)
                second = self.net.extra()
                total = first + 0.5 * second
                return total, second

            def step(self, inp, tgt):
                total, second = self.losses(inp, tgt)
                total.backward()
                self.opt.step()
                self.meter.add([second * 10])
        """,
        [(21, 9)],
    ),
    # a helper of the file returns the loss and one of its terms: the term is known by the loss's backward
    "term_returned_beside_the_loss_kept_in_a_list": (
        """
        def losses(net, inp, tgt):
            fit = crit(net(inp), tgt)
            reg = net.penalty()
            return fit + 0.1 * reg, reg

        trail = []
        for inp, tgt in batches:
            total, reg = losses(net, inp, tgt)
            total.backward()
            opt.step()
            opt.zero_grad()
            trail.append(reg)
        """,
        [(13, 5)],
    ),
    "moving_average_of_the_loss_for_logging": (
        """
        shown = 0.0
        for inp, tgt in batches:
            err = crit(net(inp), tgt)
            err.backward()
            opt.step()
            opt.zero_grad()
            shown = 0.98 * shown + 0.02 * err
        print(shown)
        """,
        [(8, 5)],
    ),
    # a keeping call nested in an `if` and a `try` of the loop, under no grad-mode switch (the look-alike of
    # NEGATIVE's keeping_call_under_a_nested_no_grad)
    "keeping_call_nested_in_an_if_and_a_try": (
        """
        class Tally:
            def add(self, val):
                self.sum += val

        tally = Tally()
        for inp, tgt in batches:
            err = crit(net(inp), tgt)
            err.backward()
            opt.step()
            opt.zero_grad()
            if verbose:
                try:
                    tally.add(err)
                except RuntimeError:
                    pass
        """,
        [(14, 13)],
    ),
    # `self.criterion = make_loss(0.1)` with `def make_loss(weight) -> PairLoss`: calling the object runs
    # `PairLoss.__call__`, whose returned dict holds attached losses; the values of its `.items()` are kept
    "dict_values_of_a_loss_object_made_by_an_annotated_factory": (
        """
        from collections import defaultdict


        class PairLoss:
            def __init__(self, weight):
                self.mse = nn.MSELoss()
                self.l1 = nn.L1Loss()
                self.weight = weight

            def __call__(self, out, target):
                fit = self.mse(out, target)
                reg = self.l1(out, target)
                return fit + self.weight * reg, {"fit": fit, "reg": reg}


        def make_loss(weight) -> PairLoss:
            return PairLoss(weight)


        class Trainer:
            def __init__(self, net, opt):
                self.net = net
                self.opt = opt
                self.criterion = make_loss(0.1)

            def train_batch(self, inp, target):
                self.opt.zero_grad()
                total, parts = self.criterion(self.net(inp), target)
                total.backward()
                self.opt.step()
                return parts

            def train_epoch(self, batches):
                sums = defaultdict(float)
                for inp, target in batches:
                    parts = self.train_batch(inp, target)
                    for name, value in parts.items():
                        sums[name] += value
                return sums
        """,
        [(39, 17)],
    ),
    # the entry `"loss"` of the dict a helper returns is the loss it back-propagated; `"count"` is a number
    "entry_of_a_returned_dict_by_its_key": (
        """
        def fit_step(model, opt, x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return {"loss": loss, "count": len(y)}


        def train(model, opt, loader):
            losses = []
            counts = []
            for x, y in loader:
                out = fit_step(model, opt, x, y)
                losses.append(out["loss"])
                counts.append(out["count"])
            return losses, counts
        """,
        [(15, 9)],
    ),
    # a loop variable reduced in place inside the loop (`dist.all_reduce(part)`) is not the one that later reads
    # the totals (`for part in totals.values()` after the loop): nothing hands the kept graphs on
    "dict_parts_reduced_in_place_then_averaged_after_the_loop": (
        """
        from collections import defaultdict


        def train(model, opt, loader, world):
            totals = defaultdict(float)
            seen = 0
            for x, y in loader:
                opt.zero_grad()
                parts = {"ce": F.cross_entropy(model(x), y), "l2": model(x).pow(2).mean()}
                sum(parts.values()).backward()
                opt.step()
                for name, part in parts.items():
                    if world > 1:
                        dist.all_reduce(part)
                    totals[name] += part
                seen += 1
            for part in totals.values():
                part /= seen
            return totals
        """,
        [(16, 13)],
    ),
    # a LightningModule's `training_step` runs once per batch of Lightning's loop, which back-propagates what it
    # returns: a list attribute of the module keeps every step's loss, graph included
    "pl_list_attr_is_flagged": (
        """
        import pytorch_lightning as pl

        class Model(pl.LightningModule):
            def __init__(self, net):
                super().__init__()
                self.net = net
                self.train_losses = []

            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = F.cross_entropy(self.net(x), y)
                self.train_losses.append(loss)
                return loss
        """,
        [(13, 9)],
    ),
    # the same, into a list held by a dict attribute
    "pl_dict_attr_append_is_flagged": (
        """
        import pytorch_lightning as pl

        class Model(pl.LightningModule):
            def __init__(self, net):
                super().__init__()
                self.net = net
                self.history = {"loss": []}

            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = F.cross_entropy(self.net(x), y)
                self.history["loss"].append(loss)
                return loss
        """,
        [(13, 9)],
    ),
    # a list that is an entry of a dict outliving the loop (`defaultdict(list)`): the dict keeps it
    "kept_defaultdict_list_append_is_flagged": (
        """
        from collections import defaultdict

        def train(model, opt, loader):
            hist = defaultdict(list)
            for x, y in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                hist["loss"].append(loss)
            return hist
        """,
        [(11, 9)],
    ),
    # the list `setdefault` puts into the dict
    "kept_setdefault_append_is_flagged": (
        """
        def train(model, opt, loader):
            hist = {}
            for x, y in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                hist.setdefault("loss", []).append(loss)
            return hist
        """,
        [(9, 9)],
    ),
    # a per-step function adds its loss into a global: the total outlives every call
    "kept_global_total_is_flagged": (
        """
        total = 0.0

        def step(model, opt, x, y):
            global total
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            total += loss

        def train(model, opt, loader):
            for x, y in loader:
                step(model, opt, x, y)
            print(total)
        """,
        [(10, 5)],
    ),
    # the same through `nonlocal`
    "kept_nonlocal_total_is_flagged": (
        """
        def train(model, opt, loader):
            total = 0.0

            def step(x, y):
                nonlocal total
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                total += loss

            for x, y in loader:
                step(x, y)
            print(total)
        """,
        [(11, 9)],
    ),
    # a method run once per step adds its loss into an attribute of `self`
    "kept_self_total_method_per_batch_is_flagged": (
        """
        class Trainer:
            def __init__(self, model, opt):
                self.model = model
                self.opt = opt
                self.total = 0.0

            def step(self, x, y):
                self.opt.zero_grad()
                loss = F.cross_entropy(self.model(x), y)
                loss.backward()
                self.opt.step()
                self.total += loss

            def fit(self, loader):
                for x, y in loader:
                    self.step(x, y)
                print(self.total)
        """,
        [(13, 9)],
    ),
    # kept for a mean taken only at the end of the epoch: every batch's graph stays alive until then
    "kept_stack_at_epoch_end_is_flagged": (
        """
        def train(model, opt, loader, epochs):
            for epoch in range(epochs):
                kept = []
                for x, y in loader:
                    opt.zero_grad()
                    loss = F.cross_entropy(model(x), y)
                    loss.backward()
                    opt.step()
                    kept.append(loss)
                print(torch.stack(kept).mean())
        """,
        [(10, 13)],
    ),
    # `extend([loss])` keeps it as `append(loss)` does
    "kept_extend_list_is_flagged": (
        """
        def train(model, opt, loader):
            losses = []
            for x, y in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                losses.extend([loss])
            print(losses)
        """,
        [(9, 9)],
    ),
    # `+= [loss]` too
    "kept_iadd_list_is_flagged": (
        """
        def train(model, opt, loader):
            losses = []
            for x, y in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                losses += [loss]
            print(losses)
        """,
        [(9, 9)],
    ),
    # a deque without a bound keeps every item
    "kept_unbounded_deque_is_flagged": (
        """
        import collections

        def train(model, opt, loader):
            recent = collections.deque()
            for x, y in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                recent.append(loss)
            print(recent)
        """,
        [(11, 9)],
    ),
    # a record that holds the loss
    "kept_history_dict_record_is_flagged": (
        """
        def train(model, opt, loader):
            history = []
            for x, y in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                history.append({"loss": loss})
            return history
        """,
        [(9, 9)],
    ),
    # `maxlen=None` is no bound
    "kept_unbounded_deque_maxlen_none_is_flagged": (
        """
        from collections import deque

        def train(model, opt, loader):
            recent = deque(maxlen=None)
            for x, y in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                recent.append(loss)
            print(recent)
        """,
        [(11, 9)],
    ),
    # a method of the object itself adds its argument into an attribute of `self`, which outlives the loop
    "kept_by_the_objects_own_method_is_flagged": (
        """
        class Trainer:
            def __init__(self, model, opt):
                self.model = model
                self.opt = opt
                self.total = 0.0

            def record(self, loss):
                self.total += loss

            def fit(self, loader):
                for x, y in loader:
                    self.opt.zero_grad()
                    loss = F.cross_entropy(self.model(x), y)
                    loss.backward()
                    self.opt.step()
                    self.record(loss)
                print(self.total)
        """,
        [(17, 13)],
    ),
    # a helper of the file adds its parameter into a global it declares: the total outlives every call
    "kept_by_a_helper_into_a_global_is_flagged": (
        """
        total = 0.0

        def record(loss):
            global total
            total += loss

        def train(model, opt, loader):
            for x, y in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                record(loss)
            print(total)
        """,
        [(14, 9)],
    ),
    "total_all_reduced_by_a_collective_after_the_loop": (
        """
        import torch
        import torch.distributed as dist
        import torch.nn.functional as F


        def fit(net, opt, loader, epochs):
            for epoch in range(epochs):
                total = torch.zeros(())
                for x, y in loader:
                    opt.zero_grad()
                    loss = F.mse_loss(net(x), y)
                    loss.backward()
                    opt.step()
                    total += loss
                dist.all_reduce(total)
                dist.barrier()
                print(epoch, total.item())
        """,
        [(15, 13)],
    ),
    "epoch_list_whose_mean_is_stored_into_a_dict_rebound_every_batch": (
        """
        import torch


        def fit(net, opt, loader, epochs):
            for epoch in range(epochs):
                losses = []
                for batch in loader:
                    out = net(batch)
                    opt.zero_grad()
                    out["loss"].backward()
                    opt.step()
                    losses.append(out["loss"])
                out["mean"] = torch.stack(losses).mean()
                print(epoch, out["mean"].item())
        """,
        [(13, 13)],
    ),
    "loss_a_helper_of_the_file_back_propagates_and_returns_in_a_tuple": (
        """
        import torch


        def finish(policy, opt):
            opt.zero_grad()
            loss = torch.cat(policy.saved_log_probs).sum()
            loss.backward()
            opt.step()
            del policy.saved_log_probs[:]
            return policy, loss, len(policy.rewards)


        def train(policy, opt, env, episodes):
            shown = 0
            for episode in range(episodes):
                policy.play(env)
                policy, loss, steps = finish(policy, opt)
                shown += loss
                print(episode, steps)
            print(shown)
        """,
        [(19, 9)],
    ),
    "loss_a_helper_of_the_file_back_propagates_and_returns": (
        """
        import torch


        def finish(policy, opt):
            opt.zero_grad()
            loss = torch.cat(policy.saved_log_probs).sum()
            loss.backward()
            opt.step()
            return loss


        def train(policy, opt, env, episodes):
            curve = []
            for episode in range(episodes):
                policy.play(env)
                curve.append(finish(policy, opt))
            print(curve)
        """,
        [(17, 9)],
    ),
    "iterates_returned_after_gradients_taken_without_a_graph": (
        """
        import torch


        def unroll(score, weights, labels, steps):
            iterates = [weights]
            for _ in range(steps):
                weights.requires_grad_(True)
                out = score(weights)
                residual = out - labels
                grad = torch.autograd.grad(out, weights, residual)[0] + weights * 0.01
                curvature = torch.autograd.grad(grad, residual, grad)[0]
                weights = weights - grad / (curvature.sum() + 1e-8)
                iterates.append(weights)
            return weights, iterates
        """,
        [(14, 9)],
    ),
    # -- a value built with grad on one branch and under no_grad on the other ------------------------------------
    "total_of_a_loss_computed_with_or_without_grad_by_a_mode_parameter": (
        """
        def run_epoch(model, loader, optimizer, summarizer, cross_valid=False):
            tot_loss = 0.
            for x, y in loader:
                if cross_valid:
                    with torch.no_grad():
                        this_loss = model(x, y)
                else:
                    this_loss = model(x, y)
                batch_loss = torch.sum(this_loss)
                tot_loss = tot_loss + batch_loss
                loss = summarizer.collect(batch_loss)
                if not cross_valid:
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            return tot_loss
        """,
        [(11, 9)],
    ),
    "mode_function_result_kept_when_called_in_its_default_mode": (
        """
        class Trainer:
            def __init__(self):
                self.history = []
                self.cv_history = []

            def fit(self, epochs):
                for epoch in range(epochs):
                    tr_loss = self.run_epoch()
                    cv_loss = self.run_epoch(cross_valid=True)
                    self.history.append(tr_loss)
                    self.cv_history.append(cv_loss)

            def run_epoch(self, cross_valid=False):
                tot_loss = 0.
                for x, y in self.loader:
                    if cross_valid:
                        with torch.no_grad():
                            out = self.model(x, y)
                    else:
                        out = self.model(x, y)
                    tot_loss = tot_loss + out.sum()
                    loss = self.collect(out)
                    if not cross_valid:
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()
                return tot_loss
        """,
        [(11, 13), (22, 13)],
    ),
    "helper_of_the_file_appends_its_parameter_to_a_list_it_is_given": (
        """
        def log_loss(history, loss):
            history.append(loss)

        def fit(model, loader, optimizer, criterion):
            history = []
            for x, y in loader:
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                log_loss(history, loss)
            return history
        """,
        [(12, 9)],
    ),
    # a helper that adds each entry of a dict it is given into the entry of another (`stats[k] += v` over
    # `.items()`), or appends it: the caller's dict of attached parts, bound before the loop, keeps every step's
    "helper_adds_the_entries_of_one_dict_into_another": (
        """
        from collections import defaultdict

        def accumulate(stats, parts):
            for name, value in parts.items():
                stats[name] += value

        def remember(history, parts):
            for name in parts:
                history[name].append(parts[name])

        def fit(model, loader, optimizer, criterion):
            stats, history = defaultdict(float), defaultdict(list)
            for x, y in loader:
                out = model(x)
                parts = {"ce": criterion(out, y), "l2": out.pow(2).mean()}
                optimizer.zero_grad()
                sum(parts.values()).backward()
                optimizer.step()
                accumulate(stats, parts)
                remember(history, parts)
        """,
        [(20, 9), (21, 9)],
    ),
    # the same total added on two exclusive branches (a flag chooses the model's head): each addition is a site the
    # fix must reach, so each is reported
    "one_total_added_on_exclusive_branches": (
        """
        for epoch in range(epochs):
            running = 0.0
            for x, y in loader:
                optimizer.zero_grad()
                if use_crf:
                    nll = model.neg_log_likelihood(x, y)
                    running += nll
                    nll.backward()
                else:
                    loss = criterion(model(x), y)
                    running += loss
                    loss.backward()
                optimizer.step()
        """,
        [(8, 13), (12, 13)],
    ),
    # an epoch loop around a function that trains (a run of its own) keeps what each run returns: the epoch's loss,
    # computed with grad after the batches, into a history handed to a monitor whose `check` (a method of the file's
    # only class of that name) plots it
    "history_of_epoch_losses_from_a_run": (
        """
        import torch

        class Monitor:
            def __init__(self, ax):
                self.ax = ax

            def check(self, net, history):
                self.ax.plot(history["train_loss"], label="train")

        def fit(model, data, optimizer, criterion, epochs, monitor=None):
            def train(net):
                for x, y in data:
                    loss = criterion(net(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                return criterion(net(data.x), data.y), {}

            history = {"train_loss": []}
            for epoch in range(epochs):
                epoch_loss, metrics = train(model)
                history["train_loss"].append(epoch_loss)
                if monitor is not None:
                    monitor.check(model, history)
            return history
        """,
        [(23, 9)],
    ),
    # a list given as a parameter (the caller's, or the mutable default shared by every call) outlives the loop;
    # saving it with torch.save back-propagates nothing
    "parameter_list_kept_across_iterations": (
        """
        import torch

        def train(loader, model, optimizer, criterion, loss_list=[]):
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                loss_list.append(loss)
            torch.save({"state": model.state_dict(), "losses": loss_list}, "ckpt.pt")
        """,
        [(10, 9)],
    ),
    # a validation loop beside the batch loop of an epoch, in code that trains (so grad is on): each batch's loss
    # is kept attached in a list over the whole pass; also at module level, with the model's forward returning a
    # tuple (`recon, mu, logvar = model(x)`, its class known through `.to(device)`)
    "validation_losses_kept_with_grad_beside_the_training_loop": (
        """
        def fit(model, optimizer, criterion, train_loader, val_loader, epochs):
            for epoch in range(epochs):
                for x, y in train_loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                val_losses = []
                for x, y in val_loader:
                    val_losses.append(criterion(model(x), y))
                print(epoch, sum(val_losses) / len(val_losses))
        """,
        [(11, 13)],
    ),
    "validation_losses_kept_with_grad_at_module_level": (
        """
        import torch
        from torch import nn


        class VAE(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(6, 4)
                self.dec = nn.Linear(2, 6)

            def forward(self, x):
                mu, logvar = self.enc(x).chunk(2, dim=-1)
                return self.dec(mu), mu, logvar


        def vae_loss(recon, x, mu, logvar):
            return nn.MSELoss()(recon, x) - 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())


        model = VAE().to("cpu")
        optimizer = torch.optim.Adam(model.parameters())
        for epoch in range(10):
            for x in train_loader:
                optimizer.zero_grad()
                recon, mu, logvar = model(x)
                loss = vae_loss(recon, x, mu, logvar)
                loss.backward()
                optimizer.step()
            val = []
            for x in val_loader:
                recon, mu, logvar = model(x)
                loss = vae_loss(recon, x, mu, logvar)
                val.append(loss)
            print(epoch, torch.stack(val).mean())
        """,
        [(34, 9)],
    ),
    # an evaluation pass whose per-batch total sums the sequences of one batch: reported where the pass's total
    # grows, not in the inner loop that sums one batch
    "evaluation_total_of_per_batch_sums": (
        """
        def train_epoch(train_iter, test_iter, criterion, model, optimizer):
            epoch_loss_train, epoch_loss_eval = 0, 0
            for batch in train_iter:
                optimizer.zero_grad()
                loss = criterion(model(batch), batch)
                loss.backward()
                optimizer.step()
                epoch_loss_train += loss.item()
            for batch in test_iter:
                batch_loss = 0
                output = model(batch)
                for sequence, target in zip(output, batch):
                    batch_loss += criterion(sequence, target)
                epoch_loss_eval += batch_loss
            return epoch_loss_train, epoch_loss_eval
        """,
        [(15, 9)],
    ),
}

NEGATIVE = {
    # the same helpers given numbers, a dict bound afresh each iteration, a helper that adds into its own copy or
    # into a number (which only rebinds its own name), and a dict of parts computed under no_grad
    "helper_adding_entries_given_numbers_or_a_fresh_dict": """
        import torch

        def accumulate(stats, parts):
            for name, value in parts.items():
                stats[name] += value

        def copy_then_add(stats, parts):
            stats = dict(stats)
            for name in parts:
                stats[name] = stats.get(name, 0) + parts[name]

        def add_number(total, value):
            total += value

        def fit(model, loader, optimizer, criterion):
            stats, total = {"ce": 0.0}, 0.0
            for x, y in loader:
                out = model(x)
                parts = {"ce": criterion(out, y)}
                numbers = {"ce": parts["ce"].item()}
                optimizer.zero_grad()
                parts["ce"].backward()
                optimizer.step()
                accumulate(stats, numbers)
                copy_then_add(stats, parts)
                add_number(total, parts["ce"])
                fresh = {"ce": 0.0}
                accumulate(fresh, parts)
            with torch.no_grad():
                for x, y in loader:
                    parts = {"ce": criterion(model(x), y)}
                    accumulate(stats, parts)
            return stats
        """,
    # `out.backward(grad)`: a tensor handed its gradient; the gradient is no loss and keeps nothing
    "a_tensor_handed_its_gradient": """
        total = 0.0
        for x, upstream in loader:
            out = model(x)
            out.backward(upstream)
            opt.step()
            opt.zero_grad()
            total += upstream
        """,
    # the same logger turning each value into a number first
    "logger_keeping_numbers_given_by_keyword": """
        class Logger:
            def __init__(self):
                self.logs = {}

            def log(self, **values):
                for k, v in values.items():
                    self.logs.setdefault(k, []).append(float(v))

        logger = Logger()
        for x, y in loader:
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            logger.log(loss=loss)
        """,
    # the loop over the entries skips the back-propagated one
    "entries_of_an_output_dict_but_its_loss": """
        running = {}
        for x, y in loader:
            out = model(x, y)
            loss = out["loss"]
            opt.zero_grad()
            loss.backward()
            opt.step()
            for k, v in out.items():
                if k != "loss":
                    running[k] = running.get(k, 0) + v
        """,
    "helper_total_of_numbers_read_from_the_loss": """
        def accumulate(total, value):
            return total + value.item()

        running = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = crit(model(x), y)
            loss.backward()
            optimizer.step()
            running = accumulate(running, loss)
        print(running)
        """,
    "helper_keeps_the_smaller_value": """
        def best_of(best, value):
            return min(best, value)

        best = float("inf")
        for x, y in loader:
            optimizer.zero_grad()
            loss = crit(model(x), y)
            loss.backward()
            optimizer.step()
            best = best_of(best, loss)
        print(best)
        """,
    "total_reset_at_each_step_of_an_accumulation_window": """
        def fit(net, batches, opt, accum_steps):
            running = 0
            for i, (x, y) in enumerate(batches):
                loss = F.mse_loss(net(x), y) / accum_steps
                running += loss
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    self_opt.step()
                    self_opt.zero_grad()
                    print(running.item())
                    running = 0
        """,
    "total_reset_every_few_iterations": """
        def fit(net, batches, opt):
            shown = 0.0
            for i, (x, y) in enumerate(batches):
                opt.zero_grad()
                loss = F.mse_loss(net(x), y)
                loss.backward()
                opt.step()
                shown += loss
                if i % 5 == 0:
                    print(shown / 5)
                    shown = 0.0
        """,
    "total_of_repeated_critic_updates_on_one_batch": """
        def fit(gen, critic, batches, opt_c, repeats):
            for real, noise in batches:
                fake = gen(noise).detach()
                critic_sum = 0.0
                for _ in range(repeats):
                    opt_c.zero_grad()
                    loss_c = critic(fake).mean() - critic(real).mean()
                    loss_c.backward()
                    opt_c.step()
                    critic_sum += loss_c
                print((critic_sum / repeats).item())
        """,
    "outputs_concatenated_detached": """
        def fit(net, batches, opt):
            seen = torch.empty(0)
            for x, y in batches:
                opt.zero_grad()
                out = net(x)
                F.mse_loss(out, y).backward()
                opt.step()
                seen = torch.cat([seen, out.detach()], dim=0)
            return seen
        """,
    "numpy_concatenation_of_numbers": """
        def fit(net, batches, opt):
            seen = np.zeros(0)
            for x, y in batches:
                opt.zero_grad()
                out = net(x)
                F.mse_loss(out, y).backward()
                opt.step()
                seen = np.concatenate([seen, out.detach().numpy()])
            return seen
        """,
    # a name bound on two paths before it is unpacked: what it holds is not taken from either definition; the count
    # beside the loss is a number
    "tuple_result_bound_on_two_paths_then_unpacked": """
        def compute(model, x, y):
            out = model(x)
            return F.mse_loss(out, y), len(y)

        def train(model, loader, optimizer, counts):
            for x, y in loader:
                optimizer.zero_grad()
                res = compute(model, x, y)
                if x is None:
                    res = (0.0, 0)
                first, count = res
                res[0].backward()
                optimizer.step()
                counts.append(count)
                counts.append(first)
            print(counts)
        """,
    "dict_parts_logged_as_numbers": """
        logs = {"ce": 0.0, "l1": 0.0}
        for x, y in loader:
            optimizer.zero_grad()
            out = model(x)
            parts = {"ce": F.cross_entropy(out, y), "l1": out.abs().mean()}
            sum(parts.values()).backward()
            optimizer.step()
            for name, part in parts.items():
                logs[name] += part.item()
        print(logs)
        """,
    "dict_keys_are_not_its_values": """
        counts = {}
        for x, y in loader:
            optimizer.zero_grad()
            parts = {"ce": F.cross_entropy(model(x), y)}
            sum(parts.values()).backward()
            optimizer.step()
            for name, part in parts.items():
                counts[name] = counts.get(name, 0) + 1
        print(counts)
        """,
    "method_returns_a_number": """
        class Net(nn.Module):
            def compute_loss(self, x, y):
                return F.cross_entropy(self(x), y).item()


        model = Net()
        running = 0
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
            running += model.compute_loss(x, y)
        print(running)
        """,
    "method_of_a_class_that_is_not_a_module": """
        class Meter:
            def __init__(self):
                self.fn = make_metric()

            def score(self, x, y):
                return self.fn(x, y)


        meter = Meter()
        total = 0
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            total += meter.score(x, y)
        print(total)
        """,
    "step_output_rebound_before_it_is_kept": """
        def train(module, loader, optimizer):
            outputs = []
            for i, batch in enumerate(loader):
                optimizer.zero_grad()
                output = module.training_step(batch, i)
                output["loss"].backward()
                optimizer.step()
                output = {k: v.detach() for k, v in output.items()}
                outputs.append(output)
            return outputs
        """,
    "step_output_kept_is_another_value": """
        def train(module, loader, optimizer):
            outputs = []
            for i, batch in enumerate(loader):
                optimizer.zero_grad()
                output = module.training_step(batch, i)
                output["loss"].backward()
                optimizer.step()
                outputs.append(metrics)
            return outputs
        """,
    "imported_loss_function_total_of_numbers": """
        from losses import my_loss

        loss_fn = my_loss
        running_loss = 0.0
        for x, y in loader:
            loss, mse, ce = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            running_loss += loss.item()
        print(running_loss)
        """,
    # rosinality/stylegan2-pytorch: a dict of the latest losses, each entry replaced at every iteration; it holds one
    # iteration's graphs, never more
    "dict_entry_replaced_each_iteration": """
        loss_dict = {}
        for idx in pbar:
            real_pred = discriminator(next(loader))
            d_loss = F.softplus(-real_pred).mean()
            loss_dict["d"] = d_loss
            loss_dict["real_score"] = real_pred.mean()
            discriminator.zero_grad()
            d_loss.backward()
            d_optim.step()
            log(reduce_loss_dict(loss_dict))
        """,
    # hysts/pytorch_image_classification: the chunks of one batch are kept for the batch's accuracy, in a list bound
    # afresh for every batch; the step comes after the chunk loop, so the list never holds more than one step
    "micro_batch_outputs_of_one_step": """
        for data, targets in train_loader:
            optimizer.zero_grad()
            outputs = []
            for data_chunk, target_chunk in zip(data.chunk(4), targets.chunk(4)):
                output_chunk = model(data_chunk)
                outputs.append(output_chunk)
                loss = loss_func(output_chunk, target_chunk)
                loss.backward()
            outputs = torch.cat(outputs)
            optimizer.step()
            log(accuracy(outputs, targets))
        """,
    "item": """
        running_loss = 0.0
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
        """,
    "detach_append": """
        history = []
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            history.append(loss.detach())
        """,
    "total_is_backpropagated": """
        total = 0
        for x, y in loader:
            total = total + criterion(model(x), y)
            total.backward()
        """,
    "no_grad_validation": """
        val_losses = []
        for epoch in range(3):
            for x, y in loader:
                criterion(model(x), y).backward()
            with torch.no_grad():
                for x, y in val_loader:
                    val_losses.append(criterion(model(x), y))
        """,
    "eval_loop_without_backward": """
        preds = []
        for x in test_loader:
            preds.append(model(x))
        """,
    "forward_collects_features": """
        class Net(nn.Module):
            def forward(self, x):
                feats = []
                for layer in self.layers:
                    x = layer(x)
                    feats.append(x)
                return feats
        """,
    "list_reset_each_iteration": """
        for x, y in loader:
            parts = []
            for head in heads:
                parts.append(crit(head(x), y))
            loss = sum(parts)
            loss.backward()
        """,
    "chunked_accumulation_backpropagated": """
        losses = []
        for x, y in loader:
            losses.append(criterion(model(x), y))
            torch.stack(losses).sum().backward(retain_graph=True)
        """,
    "count_of_samples": """
        seen = 0
        for x, y in loader:
            criterion(model(x), y).backward()
            seen += x.size(0)
        """,
    "timings_from_the_clock": """
        total_fwd = 0.0
        for x, y in loader:
            t0 = time.perf_counter()
            loss = criterion(model(x), y)
            t1 = time.perf_counter()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            delta_fwd = t1 - t0
            total_fwd += delta_fwd
        """,
    "accuracy_number_in_a_dict": """
        state = {"acc": 0.0}
        for x, y in loader:
            out = model(x)
            criterion(out, y).backward()
            optimizer.step()
            optimizer.zero_grad()
            accuracy = correct_count(out, y) / len(y)
            state["acc"] = accuracy
        """,
    "mini_run_of_five_steps_in_a_test": """
        losses = []
        for _ in range(5):
            opt.zero_grad()
            loss = model(inputs, labels=labels).loss
            loss.backward()
            opt.step()
            losses.append(loss)
        assert losses[-1] < losses[0]
        """,
    "evaluation_returns_numbers": """
        def evaluate(model, loader):
            total = 0.0
            with torch.no_grad():
                for x, y in loader:
                    total += criterion(model(x), y).item()
            return total / len(loader), total

        def train(model, loader, opt):
            history = []
            for x, y in loader:
                criterion(model(x), y).backward()
                opt.step()
                opt.zero_grad()
                val_loss, _ = evaluate(model, loader)
                history.append(val_loss)
        """,
    "count_and_logs_returned_beside_the_loss": """
        agg_sample_size = 0.0
        agg_logging_output = defaultdict(float)
        for sample in samples:
            loss, sample_size, logging_output = criterion(model, sample)
            optimizer.backward(loss)
            agg_sample_size += sample_size
            for k in logging_output:
                agg_logging_output[k] += logging_output[k]
        """,
    "records_of_detached_values": """
        outputs = []
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            outputs.append({"loss": loss.detach(), "acc": accuracy(model, x, y)})
        """,
    "helper_returns_a_number": """
        def step(model, batch, opt):
            loss = model(batch).mean()
            loss.backward()
            opt.step()
            return loss.item()

        def fit(model, loader, opt):
            total = 0.0
            for batch in loader:
                total += step(model, batch, opt)
        """,
    # pymarl-like: a tensor the function allocates, filled slot by slot over the time steps of one call's batch
    "tensor_buffer_of_one_call_filled_over_counted_steps": """
        class Learner:
            def __init__(self):
                self.critic = nn.Linear(4, 1)
                self.opt = torch.optim.Adam(self.critic.parameters())

            def fit_critic(self, batch, horizon):
                values = torch.zeros_like(batch.rewards)[:, :-1]
                for t in reversed(range(horizon)):
                    v_t = self.critic(batch.obs[:, t])
                    values[:, t] = v_t.view(-1)
                    loss = ((v_t - batch.targets[:, t]) ** 2).mean()
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
                return values
        """,
    "meters_given_numbers_or_living_one_iteration": """
        class RunningMean:
            def __init__(self):
                self.total = 0
                self.n = 0
                self.latest = None
                self.seen = []

            def update(self, val, n=1):
                self.total += val * n
                self.n += n

            def show(self, val):
                self.latest = val

            def add(self, val):
                self.seen.append(float(val))

        def train(model, loader, opt, crit):
            avg = RunningMean()
            for x, y in loader:
                loss = crit(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                avg.update(loss.item(), len(x))
                avg.show(loss)
                avg.add(loss)
                with torch.no_grad():
                    check = crit(model(x), y)
                avg.update(check)
                per_step = RunningMean()
                per_step.update(loss)

        def evaluate(model, loader, crit):
            avg = RunningMean()
            for x, y in loader:
                avg.update(crit(model(x), y))
            return avg.total
        """,
    # -- known by its use: the look-alikes ----------------------------------------------------------------------
    "meter_given_item_of_a_back_propagated_loss": """
        for batch in loader:
            loss = trainer.compute(batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            meter.update(loss.item(), len(batch))
        """,
    "detached_values_of_a_back_propagated_loss": """
        total = 0.0
        kept = []
        for batch in loader:
            loss = trainer.compute(batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.detach()
            kept.append(loss.detach().cpu().numpy())
        print(total, kept)
        """,
    "sibling_of_the_loss_in_an_unpacked_result": """
        images = []
        for batch in loader:
            loss, sample = trainer.compute(batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            images.append(sample)
        """,
    "micro_batch_total_local_to_one_call": """
        class Runner:
            def train_step(self, chunks):
                total = 0.0
                for chunk in chunks:
                    loss = self.net.loss(chunk) / len(chunks)
                    loss.backward()
                    total += loss
                self.opt.step()
                self.opt.zero_grad()
                return float(total)
        """,
    "evaluation_loop_of_an_unresolved_score": """
        def evaluate(trainer, loader):
            total = 0.0
            for batch in loader:
                total += trainer.compute(batch)
            return total / len(loader)
        """,
    "back_propagated_in_an_inner_loop_total_kept_by_the_outer": """
        history = []
        for epoch in range(n_epochs):
            running = 0.0
            for batch in loader:
                loss = trainer.compute(batch)
                opt.zero_grad()
                loss.backward()
                opt.step()
                running += loss.item()
            history.append(running)
        """,
    "loss_under_no_grad_kept_while_another_is_back_propagated": """
        scores = []
        for x, y in loader:
            loss = trainer.compute(x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                score = trainer.compute(x, y)
            scores.append(score)
        """,
    # the run's totals are numbers (`.item()`), or summed under no_grad: nothing attached is kept
    "epoch_numbers_of_a_run_kept_across_epochs": """
        def one_epoch(net, batches, opt, crit):
            fit = 0
            for inp, tgt in batches:
                opt.zero_grad()
                err = crit(net(inp), tgt)
                err.backward()
                opt.step()
                fit += err.item()
            held = 0
            with torch.no_grad():
                for inp, tgt in batches:
                    held += crit(net(inp), tgt)
            return fit / len(batches), held / len(batches)

        def fit_all(net, batches, opt, crit, rounds):
            curve, seen = [], []
            for r in range(rounds):
                a, b = one_epoch(net, batches, opt, crit)
                curve.append(a)
                seen.append(b)
            plt.plot(curve, seen)
        """,
    # a per-epoch list of what an inner loop summed as numbers
    "epoch_list_of_numbers_an_inner_loop_summed": """
        curve = []
        for r in range(rounds):
            acc = 0.0
            for inp, tgt in batches:
                err = crit(net(inp), tgt)
                err.backward()
                opt.step()
                opt.zero_grad()
                acc += err.item()
            curve.append(acc / len(batches))
        """,
    # the collector converts what is stored, the column meter is given numbers, and a per-iteration collector
    "collector_that_converts_and_meters_given_numbers": """
        class Book:
            def __setitem__(self, key, value):
                self.rows[key].append(float(value))

        class Columns:
            def push(self, values):
                for i, v in enumerate(values):
                    self.sums[i] += v

        book = Book()
        cols = Columns()
        for inp, tgt in batches:
            err = crit(net(inp), tgt)
            err.backward()
            opt.step()
            opt.zero_grad()
            book["err"] = err
            cols.push([err.item(), err.detach()])
            fresh = Columns()
            fresh.push([err])
        """,
    # the meter is given the part as a number; a part that is no term of the back-propagated total; a meter
    # built afresh in the call
    "step_body_gives_numbers_or_non_terms": """
        class Meter:
            def add(self, values):
                for i, v in enumerate(values):
                    self.sums[i] += v

        class Runner:
            def __init__(self):
                self.meter = Meter()

            def losses(self, inp, tgt):
                first = self.crit(self.net(inp), tgt)
                second = self.net.extra()
                return first, second

            def step(self, inp, tgt):
                total, second = self.losses(inp, tgt)
                total.backward()
                self.opt.step()
                self.meter.add([total.item()])
                self.meter.add([second])
                local = Meter()
                local.add([total])
        """,
    # what the helper returns beside the loss is no term of it (a count), or is returned as a number
    "value_returned_beside_the_loss_that_is_no_term": """
        def losses(net, inp, tgt):
            fit = crit(net(inp), tgt)
            reg = net.penalty()
            return fit, reg, reg.item()

        trail = []
        for inp, tgt in batches:
            total, reg, reg_value = losses(net, inp, tgt)
            total.backward()
            opt.step()
            opt.zero_grad()
            trail.append(reg)
            trail.append(reg_value)
        """,
    # a meter that converts a tensor it is given before adding it
    "meter_that_converts_a_tensor_first": """
        class Meter:
            def update(self, val, n=1):
                if torch.is_tensor(val):
                    val = val.item()
                self.sum += val * n

        meter = Meter()
        for inp, tgt in batches:
            err = crit(net(inp), tgt)
            err.backward()
            opt.step()
            opt.zero_grad()
            meter.update(err)
        """,
    "moving_average_of_numbers_for_logging": """
        shown = 0.0
        for inp, tgt in batches:
            err = crit(net(inp), tgt)
            err.backward()
            opt.step()
            opt.zero_grad()
            shown = 0.98 * shown + 0.02 * err.item()
        print(shown)
        """,
    # a keeping call under no_grad, the `with` nested in an `if` and a `try` of the loop (its calls are read through
    # the statements only): what it is handed is not kept for a backward
    "keeping_call_under_a_nested_no_grad": """
        class Tally:
            def add(self, val):
                self.sum += val

        tally = Tally()
        for inp, tgt in batches:
            err = crit(net(inp), tgt)
            err.backward()
            opt.step()
            opt.zero_grad()
            if verbose:
                try:
                    with torch.inference_mode():
                        tally.add(err)
                except RuntimeError:
                    pass
        """,
    # the object a factory annotated `-> "ShownLoss"` makes returns a dict of numbers
    "dict_of_numbers_from_a_loss_object_made_by_an_annotated_factory": """
        from collections import defaultdict


        class ShownLoss:
            def __init__(self):
                self.mse = nn.MSELoss()

            def __call__(self, out, target):
                fit = self.mse(out, target)
                return fit, {"fit": fit.item(), "count": len(target)}


        def make_loss() -> "ShownLoss":
            return ShownLoss()


        class Trainer:
            def __init__(self, net, opt):
                self.net = net
                self.opt = opt
                self.criterion = make_loss()

            def train_epoch(self, batches):
                sums = defaultdict(float)
                for inp, target in batches:
                    self.opt.zero_grad()
                    total, parts = self.criterion(self.net(inp), target)
                    total.backward()
                    self.opt.step()
                    for name, value in parts.items():
                        sums[name] += value
                return sums
        """,
    # the helper's dict holds the loss detached
    "detached_entry_of_a_returned_dict": """
        def fit_step(model, opt, x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return {"loss": loss.detach(), "count": len(y)}


        def train(model, opt, loader):
            losses = []
            for x, y in loader:
                out = fit_step(model, opt, x, y)
                losses.append(out["loss"])
            return losses
        """,
    # the values of the returned dict are added as `.item()`
    "values_of_a_returned_dict_taken_as_numbers": """
        from collections import defaultdict


        class PairLoss:
            def __init__(self):
                self.mse = nn.MSELoss()
                self.l1 = nn.L1Loss()

            def __call__(self, out, target):
                fit = self.mse(out, target)
                reg = self.l1(out, target)
                return fit + reg, {"fit": fit, "reg": reg}


        def make_loss() -> PairLoss:
            return PairLoss()


        def train(net, opt, batches):
            criterion = make_loss()
            sums = defaultdict(float)
            for inp, target in batches:
                opt.zero_grad()
                total, parts = criterion(net(inp), target)
                total.backward()
                opt.step()
                for name, value in parts.items():
                    sums[name] += value.item()
            return sums
        """,
    # the collector is bound afresh in each iteration: one step's graphs only
    "sums_of_a_returned_dict_bound_afresh_each_iteration": """
        from collections import defaultdict


        def fit_step(model, opt, x, y):
            opt.zero_grad()
            ce = F.cross_entropy(model(x), y)
            l2 = model(x).pow(2).mean()
            (ce + l2).backward()
            opt.step()
            return {"ce": ce, "l2": l2}


        def train(model, opt, loader, log):
            for x, y in loader:
                sums = defaultdict(float)
                for name, value in fit_step(model, opt, x, y).items():
                    sums[name] += value
                log(sum(v.item() for v in sums.values()))
        """,
    # a list bound afresh in each iteration: one step's loss only
    "kept_until_next_backward_is_not_flagged": """
        def train(model, opt, loader):
            for x, y in loader:
                kept = []
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                kept.append(loss)
                loss.backward()
                opt.step()
                print(kept)
        """,
    # `deque(maxlen=100)`: the oldest graphs are dropped, at most a hundred kept
    "kept_bounded_deque_is_not_flagged": """
        from collections import deque

        def train(model, opt, loader):
            recent = deque(maxlen=100)
            for x, y in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                recent.append(loss)
            print(recent)
        """,
    # `set_postfix` formats the value at once; nothing keeps it
    "kept_set_postfix_is_not_flagged": """
        from tqdm import tqdm

        def train(model, opt, loader):
            bar = tqdm(loader)
            for x, y in bar:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                bar.set_postfix(loss=loss)
        """,
    # the bound given by position
    "kept_bounded_deque_positional_is_not_flagged": """
        from collections import deque

        def train(model, opt, loader):
            recent = deque([], 50)
            for x, y in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                recent.append(loss)
            print(recent)
        """,
    # a number kept in a dict's list
    "kept_defaultdict_list_append_item_is_not_flagged": """
        from collections import defaultdict

        def train(model, opt, loader):
            hist = defaultdict(list)
            for x, y in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                hist["loss"].append(loss.item())
            return hist
        """,
    # the Lightning step keeps a detached loss
    "pl_list_attr_detached_is_not_flagged": """
        import pytorch_lightning as pl

        class Model(pl.LightningModule):
            def __init__(self, net):
                super().__init__()
                self.net = net
                self.train_losses = []

            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = F.cross_entropy(self.net(x), y)
                self.train_losses.append(loss.detach())
                return loss
        """,
    # the Lightning step only logs the loss
    "pl_logged_is_not_flagged": """
        import pytorch_lightning as pl

        class Model(pl.LightningModule):
            def __init__(self, net):
                super().__init__()
                self.net = net
                self.train_losses = []

            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = F.cross_entropy(self.net(x), y)
                self.log("train_loss", loss)
                return loss
        """,
    # the per-step method binds its total afresh at each call
    "kept_step_total_reset_each_call_is_not_flagged": """
        class Trainer:
            def __init__(self, model, opt):
                self.model = model
                self.opt = opt
                self.total = 0.0

            def step(self, x, y):
                self.opt.zero_grad()
                loss = F.cross_entropy(self.model(x), y)
                loss.backward()
                self.opt.step()
                self.total = 0.0
                self.total += loss

            def fit(self, loader):
                for x, y in loader:
                    self.step(x, y)
                print(self.total)
        """,
    # the global total adds a number
    "kept_global_total_item_is_not_flagged": """
        total = 0.0

        def step(model, opt, x, y):
            global total
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item()

        def train(model, opt, loader):
            for x, y in loader:
                step(model, opt, x, y)
            print(total)
        """,
    # another method of the class back-propagates the total (chunked accumulation)
    "kept_step_total_back_propagated_by_another_method_is_not_flagged": """
        class Trainer:
            def __init__(self, model, opt):
                self.model = model
                self.opt = opt
                self.pending = 0.0

            def step(self, x, y):
                self.opt.zero_grad()
                loss = F.cross_entropy(self.model(x), y)
                loss.backward()
                self.opt.step()
                self.pending += F.mse_loss(self.model(x), y)

            def flush(self):
                self.pending.backward()
                self.pending = 0.0

            def fit(self, loader):
                for x, y in loader:
                    self.step(x, y)
                self.flush()
        """,
    # a loss builder: its loop adapts weights through a helper's `autograd.grad` but steps nothing, and returns the
    # sum for its caller to back-propagate
    "meta_loss_summed_over_tasks_returned_by_a_loop_that_does_not_step": """
        def adapted(net, x, y, lr):
            loss = F.cross_entropy(net(x), y)
            grads = torch.autograd.grad(loss, net.parameters())
            return [p - lr * g for p, g in zip(net.parameters(), grads)]


        def meta_loss(net, tasks, lr):
            total = 0.0
            for x, y in tasks:
                fast = adapted(net, x, y, lr)
                total += F.cross_entropy(net(x, fast), y)
            return total / len(tasks)
        """,
    # the object's own method is given `loss.item()`
    "own_method_given_a_number": """
        class Trainer:
            def __init__(self, model, opt):
                self.model = model
                self.opt = opt
                self.total = 0.0

            def record(self, loss):
                self.total += loss

            def fit(self, loader):
                for x, y in loader:
                    self.opt.zero_grad()
                    loss = F.cross_entropy(self.model(x), y)
                    loss.backward()
                    self.opt.step()
                    self.record(loss.item())
                print(self.total)
        """,
    # the object's own method converts what it keeps
    "own_method_that_converts": """
        class Trainer:
            def __init__(self, model, opt):
                self.model = model
                self.opt = opt
                self.total = 0.0

            def record(self, loss):
                self.total += float(loss)

            def fit(self, loader):
                for x, y in loader:
                    self.opt.zero_grad()
                    loss = F.cross_entropy(self.model(x), y)
                    loss.backward()
                    self.opt.step()
                    self.record(loss)
                print(self.total)
        """,
    # the object's own method only replaces an attribute
    "own_method_that_replaces": """
        class Trainer:
            def __init__(self, model, opt):
                self.model = model
                self.opt = opt
                self.total = 0.0

            def record(self, loss):
                self.last = loss

            def fit(self, loader):
                for x, y in loader:
                    self.opt.zero_grad()
                    loss = F.cross_entropy(self.model(x), y)
                    loss.backward()
                    self.opt.step()
                    self.record(loss)
                print(self.total)
        """,
    # the helper adds `loss.item()` into the global
    "global_helper_adds_a_number": """
        total = 0.0

        def record(loss):
            global total
            total += loss.item()

        def train(model, opt, loader):
            for x, y in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                record(loss)
            print(total)
        """,
    # the helper converts what it adds
    "global_helper_converts": """
        total = 0.0

        def record(loss):
            global total
            total += float(loss)

        def train(model, opt, loader):
            for x, y in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                record(loss)
            print(total)
        """,
    # the helper rebinds its parameter detached before adding it
    "global_helper_detaches_first": """
        total = 0.0

        def record(loss):
            global total
            loss = loss.detach()
            total += loss

        def train(model, opt, loader):
            for x, y in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                record(loss)
            print(total)
        """,
    # the caller hands the helper a number
    "global_helper_given_a_number": """
        total = 0.0

        def record(loss):
            global total
            total += loss

        def train(model, opt, loader):
            for x, y in loader:
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                record(loss.item())
            print(total)
        """,
    "loss_a_helper_detaches_after_its_backward_before_returning_it": """
        import torch


        def finish(policy, opt):
            opt.zero_grad()
            loss = torch.cat(policy.saved_log_probs).sum()
            loss.backward()
            opt.step()
            loss = loss.detach()
            return policy, loss, len(policy.rewards)


        def train(policy, opt, env, episodes):
            shown = 0
            for episode in range(episodes):
                policy.play(env)
                policy, loss, steps = finish(policy, opt)
                shown += loss
                print(episode, steps)
            print(shown)
        """,
    "unrolled_optimizer_returning_its_differentiable_iterates": """
        import torch


        def unroll(score, weights, labels, steps):
            iterates = [weights]
            for _ in range(steps):
                weights.requires_grad_(True)
                out = score(weights)
                residual = out - labels
                grad = torch.autograd.grad(out, weights, residual, create_graph=True)[0] + weights * 0.01
                curvature = torch.autograd.grad(grad, residual, grad, create_graph=True)[0]
                weights = weights - grad / (curvature.sum() + 1e-8)
                iterates.append(weights)
            return weights, iterates
        """,
    "mode_function_called_only_in_its_no_grad_mode": """
        class Trainer:
            def __init__(self):
                self.cv_history = []

            def fit(self, epochs):
                for epoch in range(epochs):
                    self.train_epoch()
                    cv_loss = self.run_epoch(cross_valid=True)
                    self.cv_history.append(cv_loss)

            def run_epoch(self, cross_valid=False):
                tot = 0.
                for x, y in self.loader:
                    if cross_valid:
                        with torch.no_grad():
                            out = self.model(x, y)
                    else:
                        out = self.model(x, y)
                    tot = tot + out.sum()
                return tot
        """,
    "helper_appends_to_a_list_emptied_after_each_episode": """
        def remember(buf, lp):
            buf.append(lp)

        def reinforce(policy, env, optimizer, episodes):
            log_probs = []
            for ep in range(episodes):
                state = env.reset()
                for t in range(100):
                    dist = policy(state)
                    action = dist.sample()
                    remember(log_probs, dist.log_prob(action))
                    state, reward, done = env.step(action)
                loss = -torch.stack(log_probs).sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                del log_probs[:]
        """,
    "helper_appends_to_a_list_bound_in_each_iteration": """
        def remember(buf, lp):
            buf.append(lp)

        def fit(model, loader, optimizer, criterion):
            for x, y in loader:
                hist = []
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                remember(hist, loss)
        """,
    "lightning_step_appends_a_record_of_detached_values": """
        class Model(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.outs = []

            def training_step(self, batch, batch_idx):
                x, y = batch
                out = self(x)
                loss = F.mse_loss(out, y)
                self.outs.append({"pred": out.detach(), "y": y, "loss": loss.item()})
                return loss
        """,
    "ignite_handler_keeps_the_number_the_update_returns": """
        from ignite.engine import Engine, Events

        def update(engine, batch):
            x, y = batch
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            return loss.item()

        trainer = Engine(update)
        losses = []

        def log(engine):
            losses.append(engine.state.output)

        trainer.add_event_handler(Events.ITERATION_COMPLETED, log)
        """,
    # the same shapes keeping numbers, and a history handed to a method of the file that back-propagates what it is
    # given
    "runs_and_parameters_keeping_numbers_or_handing_on": """
        import torch

        class Refiner:
            def check(self, net, history):
                torch.stack(history).sum().backward()

        def train(loader, model, optimizer, criterion, loss_list=[]):
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                loss_list.append(loss.item())

        def fit(model, data, optimizer, criterion, epochs, refiner):
            def run(net):
                for x, y in data:
                    loss = criterion(net(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                return criterion(net(data.x), data.y)

            history, numbers = [], []
            for epoch in range(epochs):
                epoch_loss = run(model)
                numbers.append(epoch_loss.item())
                history.append(epoch_loss)
                refiner.check(model, history)
        """,
    # the same validation loop under `no_grad`, or keeping numbers; a loop of one training step's heads, whose
    # list the batch loop binds afresh; a pass over the parameters (no forward)
    "validation_losses_kept_under_no_grad_or_as_numbers": (
        """
        def fit(model, optimizer, criterion, train_loader, val_loader, epochs):
            for epoch in range(epochs):
                for x, y in train_loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                val_losses, numbers = [], []
                with torch.no_grad():
                    for x, y in val_loader:
                        val_losses.append(criterion(model(x), y))
                for x, y in val_loader:
                    numbers.append(criterion(model(x), y).item())
                print(epoch, sum(val_losses) / len(val_losses), sum(numbers))
        """
    ),
    "losses_of_one_step_heads_kept_in_a_list_bound_per_batch": (
        """
        def fit(model, heads, optimizer, criterion, loader):
            for x, y in loader:
                feats = model(x)
                per_head = []
                for head in heads:
                    per_head.append(criterion(head(feats), y))
                loss = criterion(feats.mean(1), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                print([l.item() for l in per_head])
        """
    ),
    "parameter_norms_kept_after_the_training_loop": (
        """
        def fit(model, optimizer, criterion, loader, epochs):
            for epoch in range(epochs):
                for x, y in loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                norms = []
                for p in model.parameters():
                    norms.append(p.norm())
                print(epoch, norms)
        """
    ),
    # a sliding window of validation losses: the loop takes the oldest out, so at most `k` graphs are kept
    "validation_losses_in_a_sliding_window": (
        """
        window = []
        for epoch in range(epochs):
            optimizer.zero_grad()
            loss = F.nll_loss(model(x)[train_idx], y[train_idx])
            loss.backward()
            optimizer.step()
            val_loss = F.nll_loss(model(x)[val_idx], y[val_idx])
            window.append(val_loss)
            if len(window) > k:
                del window[0]
        """
    ),
}


@pytest.mark.parametrize("name", POSITIVE)
def test_positive(name):
    src, expected = POSITIVE[name]
    assert findings(src, "TL007") == expected


# A module's forward keeping activations (`engines.kept_by_forward`), in the shapes that are not a leak: {keep} is the
# line of `forward`, {loop} what the training loop does with the module's list before its backward.
_FORWARD_KEEPS = """
        class Probe(nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = nn.Linear(8, 8)
                self.store = False
                self.maps = []

            def forward(self, x):
                h = self.layer(x).relu()
                {keep}
                return h.mean()

        net = Probe()
        for x in loader:
            optimizer.zero_grad()
            loss = net(x)
            {loop}
            loss.backward()
            optimizer.step()
        """
NEGATIVE.update({
    "forward_keeps_activations_only_when_asked": _FORWARD_KEEPS.format(
        keep="if self.store:\n                    self.maps.append(h)", loop="pass"),
    "forward_keeps_activations_emptied_by_the_loop": _FORWARD_KEEPS.format(keep="self.maps.append(h)", loop="net.maps.clear()"),
    "forward_keeps_activations_bound_afresh_by_the_loop": _FORWARD_KEEPS.format(keep="self.maps.append(h)", loop="net.maps = []"),
    "forward_keeps_detached_activations": _FORWARD_KEEPS.format(keep="self.maps.append(h.detach())", loop="pass"),
    "forward_buffer_bound_afresh_per_call": _FORWARD_KEEPS.format(
        keep="self.maps = []\n                self.maps.append(h)", loop="pass"),
    "forward_auxiliary_losses_back_propagated_by_the_loop": _FORWARD_KEEPS.format(
        keep="self.maps.append(h.pow(2).mean())", loop="loss = loss + sum(net.maps)\n            net.maps.clear()"),
})


@pytest.mark.parametrize("name", NEGATIVE)
def test_negative(name):
    assert findings(NEGATIVE[name], "TL007") == []


def test_fix_item_for_numbers_is_safe():
    out = fixed(POSITIVE["running_loss"][0], "TL007", unsafe=False)
    assert "    running_loss += loss.item()\n" in out
    assert fixed(out, "TL007") == out


def test_fix_detach_for_lists_and_tensor_use():
    out = fixed(POSITIVE["history_append"][0], "TL007", unsafe=False)
    assert "history.append(loss.detach())" in out
    src = """
    total = 0
    for x, y in loader:
        loss = crit(model(x), y)
        loss.backward()
        total = total + loss
    print(total.item())
    """
    assert "total = total + loss.detach()" in fixed(src, "TL007", unsafe=False)


def test_fix_item_only_when_the_total_is_only_shown():
    """`.item()` turns the total into a float: safe only when the value is a scalar (it is back-propagated with a
    plain backward) and every other use of the total only prints or logs it. An average computed from it and
    used as a tensor later keeps `.detach()`."""
    src = """
    running = 0.0
    for x, y in loader:
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        running += loss
    avg = running / len(loader)
    print(avg.item())
    """
    assert "running += loss.detach()" in fixed(src, "TL007", unsafe=False)


def test_fix_detach_when_the_value_is_not_known_to_be_a_scalar():
    out = fixed(POSITIVE["divided_as_it_accumulates"][0], "TL007", unsafe=False)
    assert "epoch_loss += (loss / len(train_loader)).detach()" in out
    assert findings(out, "TL007") == [] and fixed(out, "TL007") == out


def test_no_fix_and_no_finding_for_numbers():
    """A float from a timer added into a total (`total_fwd += delta_fwd`) is no graph: no finding, and no fix that
    would turn it into `delta_fwd.item()`."""
    src = """
    total_fwd = 0.0
    for x, y in loader:
        t0 = time.perf_counter()
        loss = crit(model(x), y)
        delta_fwd = time.perf_counter() - t0
        loss.backward()
        opt.step()
        opt.zero_grad()
        total_fwd += delta_fwd
    """
    assert findings(src, "TL007") == [] and fixed(src, "TL007", unsafe=True) == textwrap.dedent(src)


def test_fix_detaches_the_values_kept_in_a_record():
    out = fixed(POSITIVE["records_holding_the_loss"][0], "TL007", unsafe=False)
    assert 'outputs.append({"loss": loss.detach(), "n": len(y)})' in out
    assert findings(out, "TL007") == [] and fixed(out, "TL007") == out


# Values kept on purpose to be back-propagated later. A pipeline schedule keeps each micro-batch's output in a queue
# and pops it into a backward through a helper; a `.detach()` there would make that backward raise "element 0 of
# tensors does not require grad", so neither a finding nor a fix is right.
KEPT_FOR_A_LATER_BACKWARD = {
    "pipeline_queue_popped_into_a_backward_helper": """
        def backward_step(output):
            output.backward()

        def train_batch(model, batch, opt, n_micro=4, in_flight=2):
            outputs = []
            for mb in batch.chunk(n_micro):
                out = model(mb).pow(2).mean()
                outputs.append(out)
                if len(outputs) > in_flight:
                    backward_step(outputs.pop(0))
            while outputs:
                backward_step(outputs.pop(0))
            opt.step()
        """,
    "popped_item_bound_then_handed_to_a_method": """
        class Schedule:
            def backward_step(self, output, grad=None):
                torch.autograd.backward(output, grad)

            def run(self, batch):
                queue = []
                for mb in batch:
                    out = self.model(mb)
                    aux = out.pow(2).mean()
                    aux.backward(retain_graph=True)
                    queue.append(out)
                    if len(queue) > 2:
                        item = queue.pop(0)
                        self.backward_step(item, torch.ones_like(item))
        """,
    "handed_through_a_helper_to_the_backward": """
        def finish(outputs):
            for out in outputs:
                flush(out)

        def flush(out):
            out.backward()

        kept = []
        for x, y in loader:
            loss = crit(model(x), y)
            loss.backward(retain_graph=True)
            kept.append(loss)
        finish(kept)
        """,
    "popped_items_handed_to_a_call_not_followed": """
        from pipeline import send_for_backward

        pending = []
        for x, y in loader:
            out = model(x)
            aux = out.pow(2).mean()
            aux.backward(retain_graph=True)
            pending.append(out)
            if len(pending) > 2:
                send_for_backward(pending.pop(0))
        """,
    "total_back_propagated_through_torch_autograd_imported_by_name": """
        import torch
        from torch import autograd
        import torch.nn.functional as F


        def fit(net, opt, loader, epochs):
            for epoch in range(epochs):
                total = torch.zeros(())
                for x, y in loader:
                    opt.zero_grad()
                    loss = F.mse_loss(net(x), y)
                    loss.backward(retain_graph=True)
                    opt.step()
                    total += loss
                autograd.backward(total)
        """,
    "epoch_mean_stored_into_a_dict_the_next_backwards_read": """
        import torch


        def fit(net, opt, loader, epochs):
            carry = {}
            for epoch in range(epochs):
                losses = []
                for batch in loader:
                    out = net(batch)
                    opt.zero_grad()
                    (out["loss"] + sum(carry.values())).backward(retain_graph=True)
                    opt.step()
                    losses.append(out["loss"])
                carry["mean"] = torch.stack(losses).mean()
        """,
}


@pytest.mark.parametrize("name", KEPT_FOR_A_LATER_BACKWARD)
def test_values_kept_for_a_later_backward_are_not_flagged(name):
    src = KEPT_FOR_A_LATER_BACKWARD[name]
    assert findings(src, "TL007") == []
    assert fixed(src, "TL007", unsafe=True) == textwrap.dedent(src)


def test_kept_values_only_read_are_still_flagged():
    # Builtins, display and torch's functions read the list without back-propagating it.
    src = """
    losses = []
    for x, y in loader:
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss)
        if len(losses) % 100 == 0:
            pbar.set_postfix(loss=torch.stack(losses).mean().item())
            logger.info("loss %s", sum(losses) / len(losses))
    """
    assert findings(src, "TL007") == [(7, 5)]
    assert "losses.append(loss.detach())" in fixed(src, "TL007", unsafe=False)


def test_kept_values_handed_to_a_helper_that_only_reads_them_are_still_flagged():
    src = """
    def mean_of(values):
        return sum(values) / len(values)

    history = []
    for x, y in loader:
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
        history.append(loss)
        print(mean_of(history))
    """
    assert findings(src, "TL007") == [(10, 5)]


# A test's mini-run whose trip count comes from a parameter default or a module constant keeps a bounded handful of
# small graphs, freed with the list it returns: not a leak.
MINI_RUN = """
STEPS = 20

def run_steps(model, opt, x, y, steps={default}):
    losses = []
    for _ in range({bound}):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss)
    return losses

def test_numerics():
    losses = run_steps(model, opt, x, y{call})
    assert losses[-1] < losses[0]
"""


@pytest.mark.parametrize(
    "default, bound, call",
    [
        ("20", "steps", ""),  # the parameter's default
        ("20", "STEPS", ""),  # a constant of the module
        ("20", "steps", ", steps=25"),  # what the file's callers pass, by keyword
        ("5", "steps", ", STEPS"),  # ... or by position, a module constant
        ("20", "2, steps", ""),
    ],
)
def test_mini_run_bounded_by_a_constant_of_the_file_is_not_flagged(default, bound, call):
    assert findings(MINI_RUN.format(default=default, bound=bound, call=call), "TL007") == []


@pytest.mark.parametrize(
    "default, bound, call",
    [
        ("20", "steps", ", steps=1000"),  # a caller asks for many steps
        ("20", "steps", ", steps=n_steps"),  # a caller passes what the file does not fix
        ("20", "steps", ", *extra"),
        ("None", "steps", ""),
        ("20", "n_steps", ""),  # a global the file never binds
    ],
)
def test_run_not_bounded_by_a_constant_of_the_file_is_flagged(default, bound, call):
    assert findings(MINI_RUN.format(default=default, bound=bound, call=call), "TL007") == [(11, 9)]


def test_bounded_loops_multiply_when_the_list_outlives_them():
    src = """
    history = []
    for epoch in range(10):
        for _ in range(10):
            loss = crit(model(x), y)
            loss.backward()
            opt.step()
            history.append(loss)
    """
    assert findings(src, "TL007") == [(8, 9)]  # a hundred graphs kept, not a handful
    fresh = """
    for epoch in range(10):
        history = []
        for _ in range(10):
            loss = crit(model(x), y)
            loss.backward()
            opt.step()
            history.append(loss)
    """
    assert findings(fresh, "TL007") == []  # bound afresh per epoch: ten at most


def test_message_parenthesizes_an_operation():
    """The suggested `.item()` applies to the whole kept value, not to its last operand."""
    src = """
        def fit(model, loader, opt, crit):
            running_loss = 0.0
            for x, y in loader:
                loss = crit(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
                running_loss += loss * x.size(0)
            return running_loss
    """
    assert "store `(loss * x.size(0)).item()`" in messages(src, "TL007")[0][2]


def test_fix_detaches_the_record_a_step_method_keeps():
    out = fixed(POSITIVE["lightning_step_appends_a_record_of_its_output_cleared_only_at_epoch_end"][0], "TL007")
    assert 'self.outs.append({"pred": out.detach(), "y": y})' in out
    assert fixed(out, "TL007") == out


def test_message():
    """The full text of the finding, so a change of wording is seen here."""
    assert messages(POSITIVE["dict_parts_iterated_with_items"][0], "TL007") == [(
        11, 13,
        "`part` is still attached to its graph and is kept in `logs` across iterations, and `logs` itself is "
        "never back-propagated: every step's graph stays alive and memory grows; store `part.item()` or "
        "`.detach()`",
    )]


# A critic trained step by step over the time steps of one sequence batch, its value at each step written into its
# own slot of a buffer the function returns (a tensor assembled position by position, as `torch.stack` would).
PER_POSITION = """
    def fit_critic(self, seq, target):
        values = torch.zeros_like(target){make}
        for {var} in {loop}:
            v = self.critic(seq, t)
            values{slot} = v.squeeze(-1)
            loss = (v.squeeze(-1) - target[:, t]).pow(2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        {tail}
"""


def _per_position(make="", var="t", loop="reversed(range(seq.size(1)))", slot="[:, t]", tail="return values"):
    return PER_POSITION.format(make=make, var=var, loop=loop, slot=slot, tail=tail)


# A buffer the function allocates, filled over a counted loop, holds one call's graphs whatever slot each pass
# writes and wherever it goes after (returned, shown, or replacing the object's previous one): bounded by the call.
@pytest.mark.parametrize("src", [
    _per_position(),
    _per_position(loop="range(seq.shape[1])", make="[:, :-1]"),
    _per_position(loop="range(n_steps)"),
    _per_position(slot="[:, 0]"),
    _per_position(tail="self.values = values"),
    _per_position(tail="print(values.mean())"),
])
def test_buffer_filled_slot_by_slot_over_a_counted_loop_is_not_flagged(src):
    assert findings(src, "TL007") == []


def test_buffer_filled_over_the_batches_of_a_loader_is_still_flagged():
    src = _per_position(var="i, (x, y)", loop="enumerate(loader)", slot="[i]")  # an epoch over a loader
    assert findings(src, "TL007") == [(6, 9)]


# A list whose last item is back-propagated each iteration: the item carries a graph (known by its use), and the
# list keeps every earlier one though no backward reads them again.
LATEST_ITEM = """
def fit(params, objective, opt, steps):
    history = {make}
    for it in range(steps):
        opt.zero_grad()
        terms = objective(*params)
        history.append(functools.reduce(operator.add, terms))
        {between}
        {backward}
        opt.step()
    return history
"""


def _latest(make="[]", between="pass", backward="history[-1].backward()"):
    return LATEST_ITEM.format(make=make, between=between, backward=backward)


@pytest.mark.parametrize("src", [_latest(), _latest(make="list()"), _latest(backward="history[-1].backward(retain_graph=True)")])
def test_last_item_back_propagated_keeps_the_earlier_ones(src):
    assert findings(src, "TL007") == [(7, 9)]


@pytest.mark.parametrize("src", [
    _latest(make="collections.deque(maxlen=3)"),                    # bounded by the deque
    _latest(between="stale = history.pop(0) if len(history) > 3 else None"),  # the loop takes items out
    _latest(backward="history.pop().backward()"),                     # the item leaves the list
    _latest(backward="sum(history).backward()"),                      # the whole list is back-propagated (TL001)
    _latest(backward="history[0].backward()"),                        # not the item just appended
    _latest(between="history = history[-2:]"),                        # rebound in the loop: not carried whole
])
def test_last_item_look_alikes_are_not_flagged(src):
    assert findings(src, "TL007") == []


# An evaluation function that a training loop runs with grad enabled, summing attached losses over its pass.
EVALUATED = """\
import torch


class Fitter:
    def evaluate(self, loader):
        {head}
        total = 0
        for x, y in loader:
            {body}
        return total / len(loader)

    def fit(self, loader, val_loader, opt, epochs):
        for epoch in range(epochs):
            for x, y in loader:
                opt.zero_grad()
                loss = self.crit(self.net(x), y)
                loss.backward()
                opt.step()
            {call}
            print(score)
"""


def _evaluated(head="pass", body="total += self.crit(self.net(x), y)", call="score = self.evaluate(val_loader)"):
    return EVALUATED.format(head=head, body=body, call=call)


def test_a_pass_summed_with_grad_enabled_during_training_is_flagged():
    assert findings(_evaluated(), "TL007") == [(9, 13)]


def test_a_pass_whose_total_is_only_printed_by_the_training_loop_is_flagged():
    """`print(self.evaluate(val_loader))`: the total is read by a call that back-propagates nothing."""
    src = _evaluated(call="print(self.evaluate(val_loader))").replace("            print(score)\n", "")
    assert findings(src, "TL007") == [(9, 13)]
    backprop = _evaluated(call="self.evaluate(val_loader).backward()").replace("            print(score)\n", "")
    assert findings(backprop, "TL007") == []


@pytest.mark.parametrize("src", [
    _evaluated(body="with torch.no_grad():\n                total += self.crit(self.net(x), y)"),   # under no_grad
    _evaluated(call="with torch.no_grad():\n                score = self.evaluate(val_loader)"),     # called so
    _evaluated(head="torch.set_grad_enabled(False)"),                                    # grad switched off
    _evaluated(body="total += self.crit(self.net(x), y).item()"),                        # a number
    _evaluated(body="total = 0\n            total += self.crit(self.net(x), y)"),        # one batch's graph
    _evaluated(call="score = self.evaluate(val_loader)\n            score.backward()"),  # a loss builder
    _evaluated(body="total += self.crit(self.net(x), y)\n            total.backward()"),  # it back-propagates
])
def test_evaluation_look_alikes_are_not_flagged(src):
    assert findings(src, "TL007") == []


def test_an_evaluation_returning_a_number_is_not_flagged():
    src = _evaluated().replace("return total / len(loader)", "return total.item() / len(loader)")
    assert findings(src, "TL007") == []


# The values of a dict of losses whose sum is back-propagated carry a graph, whoever built the dict.
DICT_OF_LOSSES = """
    for x, y in loader:
        optimizer.zero_grad()
        losses = model(x, y)
        loss = sum(losses.values())
        loss.backward()
        optimizer.step()
        for k, v in losses.items():
            log_vars[k] += {value}
"""


def test_values_of_a_back_propagated_dict_of_losses_kept_for_logging():
    assert findings("log_vars = {}\n" + textwrap.dedent(DICT_OF_LOSSES).format(value="v"), "TL007") == [(10, 9)]


def test_values_of_a_back_propagated_dict_of_losses_logged_as_numbers():
    assert findings("log_vars = {}\n" + textwrap.dedent(DICT_OF_LOSSES).format(value="v.item()"), "TL007") == []


def test_values_of_a_dict_that_is_not_back_propagated_stay_unknown():
    src = """
        log_vars = {}
        for x, y in loader:
            optimizer.zero_grad()
            stats = model.stats(x)
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            for k, v in stats.items():
                log_vars[k] += v
        """
    assert findings(src, "TL007") == []


def test_dict_from_a_call_whose_values_are_back_propagated():
    """Once a negative ("a dict from a call stays unknown"): `sum(parts.values()).backward()` says every value of
    `parts` that is a tensor carries a graph, so each kept per name keeps one step's graph."""
    src = """
        logs = {}
        for batch in loader:
            optimizer.zero_grad()
            parts = model.losses(batch)
            sum(parts.values()).backward()
            optimizer.step()
            for name, part in parts.items():
                logs[name] = logs.get(name, 0) + part
        print(logs)
        """
    assert findings(src, "TL007") == [(9, 9)]


METERS_IN_A_DICT = textwrap.dedent("""
    class AverageMeter:
        def __init__(self, name):
            self.name, self.sum, self.count = name, 0, 0

        def update(self, val, n=1):
            self.sum += val * n
            self.count += n

    def train(model, loader, optimizer, criterion, names):
        meters = {meters_built}
        for x, y in loader:
            optimizer.zero_grad()
            out = model(x)
            loss_dict = criterion(out, y)
            loss = loss_dict["loss"]
            loss.backward()
            optimizer.step()
            for k in loss_dict:
                meters[k].update({value}, x.size(0))
        return meters
""")


def test_meters_held_in_a_dict_keep_what_they_are_given():
    src = METERS_IN_A_DICT.format(meters_built="OrderedDict([(k, AverageMeter(k)) for k in names])",
                                  value="loss_dict[k]")
    assert findings(src, "TL007") == [(20, 13)]
    (_, _, message), = messages(src, "TL007")
    assert "`meters[...].update` adds it into an attribute of an element of `meters`" in message


def test_meters_held_in_a_dict_given_numbers_keep_no_graph():
    src = METERS_IN_A_DICT.format(meters_built="{k: AverageMeter(k) for k in names}", value="loss_dict[k].item()")
    assert findings(src, "TL007") == []


def test_a_dict_of_objects_of_several_classes_is_not_followed():
    src = METERS_IN_A_DICT.format(meters_built="{'loss': AverageMeter('loss'), 'time': Timer()}",
                                  value="loss_dict[k]").replace("def train(", "class Timer:\n    def update(self, v, n=1):\n        pass\n\ndef train(")
    assert findings(src, "TL007") == []


# -- a total kept by a paired assignment or by an in-place add ---------------------------------------------------
KEPT_BY = """
    for epoch in range(epochs):
        {start}
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            {keep}
        print(total)
"""

KEPT_BY_POSITIVE = {
    # `a, b = a + v, b + 1` binds each name to its own item: `total += loss * len(x)`
    "paired_assignment": ("total, n = 0, 0", "total, n = total + loss * len(x), n + len(x)", (9, 9)),
    # `total.add_(loss)` adds into `total` in place: the first add makes it require grad, then each graph is kept
    "in_place_add": ("total = torch.zeros(())", "total.add_(loss)", (9, 9)),
}


@pytest.mark.parametrize("name", sorted(KEPT_BY_POSITIVE))
def test_total_kept_by(name):
    start, keep, where = KEPT_BY_POSITIVE[name]
    assert findings(KEPT_BY.replace("{start}", start).replace("{keep}", keep), "TL007") == [where]


KEPT_BY_NEGATIVE = {
    "paired_assignment_of_numbers": ("total, n = 0, 0", "total, n = total + loss.item() * len(x), n + len(x)"),
    # a swap is not two assignments in a row: `total` is bound to the old `n`, a count
    "swap": ("total, n = 0, 0", "total, n = n, total + 1"),
    "in_place_add_detached": ("total = torch.zeros(())", "total.add_(loss.detach())"),
    # a parameter moved in place under no_grad (a hand-written update), not a total
    "in_place_update": ("total = 0", "with torch.no_grad():\n                w.add_(-lr * w.grad)"),
}


@pytest.mark.parametrize("name", sorted(KEPT_BY_NEGATIVE))
def test_total_kept_by_look_alikes(name):
    start, keep = KEPT_BY_NEGATIVE[name]
    assert findings(KEPT_BY.replace("{start}", start).replace("{keep}", keep), "TL007") == []


def test_paired_total_fix_detaches_its_item():
    src = KEPT_BY.replace("{start}", "total, n = 0, 0").replace("{keep}", "total, n = total + loss, n + 1")
    assert "total, n = total + loss.detach(), n + 1" in fixed(src, "TL007")


# -- a transformers/trl Trainer subclass's step hooks run once per step of the Trainer's loop ----------------------
TRAINER_HOOK = """
    import torch
    from {package} import {base}


    class Distiller({base}):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.aux_seen = []

        def {hook}(self, model, inputs, return_outputs=False):
            outputs = model(**inputs)
            aux = outputs.logits.pow(2).mean()
            {keep}
            loss = outputs.loss + 0.01 * aux
            return (loss, outputs) if return_outputs else loss
"""


def _trainer_hook(package="transformers", base="Trainer", hook="compute_loss", keep="self.aux_seen.append(aux)"):
    return TRAINER_HOOK.format(package=package, base=base, hook=hook, keep=keep)


@pytest.mark.parametrize(("package", "base", "hook"), [
    ("transformers", "Trainer", "compute_loss"),
    ("transformers", "Seq2SeqTrainer", "compute_loss"),
    ("trl", "SFTTrainer", "compute_loss"),
])
def test_trainer_hook_keeps_each_steps_graph(package, base, hook):
    (line, col, message), = messages(_trainer_hook(package, base, hook), "TL007")
    assert (line, col) == (14, 9)
    assert "outlives each call of `compute_loss()`, run once per training step" in message


@pytest.mark.parametrize("src", [
    _trainer_hook(keep="self.aux_seen.append(aux.item())"),  # a number
    _trainer_hook(keep="self.aux_last = aux"),  # one step's value, replaced by the next
    _trainer_hook(package="mylib.training"),  # a Trainer of another package: nothing says when it runs the hook
    _trainer_hook(hook="evaluate_loss"),  # not a hook the Trainer runs per step
], ids=["item", "replaced", "other_package", "other_method"])
def test_trainer_hook_look_alikes(src):
    assert findings(src, "TL007") == []


def test_a_step_method_in_a_file_without_a_loop_keeps_each_steps_graph():
    """An agent's `update(batch)` back-propagates and steps: a loop of another file runs it once per step, so what
    it appends to `self` keeps every step's graph, though this file has no loop of its own."""
    src = """
        class Agent:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.Adam(net.parameters())
                self.losses = []

            def update(self, obs, ret):
                loss = (self.net(obs) - ret).pow(2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                self.losses.append(loss)
                return loss.item()
    """
    assert findings(src, "TL007") == [(13, 9)]
    assert findings(src.replace("self.losses.append(loss)", "self.losses.append(loss.item())"), "TL007") == []


ITEM_STORE = """
    for epoch in range(epochs):
        seen = {made}
        for i, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            seen[i] = loss
        print(seen.mean())
"""


def test_an_item_stored_into_a_tensor_keeps_its_graph():
    """`seen[i] = loss` into a torch tensor copies through autograd: `seen` then holds every step's graph."""
    assert findings(ITEM_STORE.format(made="torch.zeros(len(loader))"), "TL007") == [(9, 9)]


@pytest.mark.parametrize("made", ["np.zeros(len(loader))", "numpy.empty(len(loader))"])
def test_an_item_stored_into_an_ndarray_keeps_no_graph(made):
    """An ndarray holds numbers: the store converts the loss (or raises), it keeps no graph."""
    assert findings(ITEM_STORE.format(made=made), "TL007") == []


KEPT_AS_NUMBERS = """
    for epoch in range(epochs):
        seen = []
        for x, y in loader:
            optimizer.zero_grad()
            out = model(x)
            loss = criterion(out, y)
            {more}
            loss.backward()
            optimizer.step()
            {keep}
        print(seen)
"""


@pytest.mark.parametrize(("more", "keep"), [
    # one arm reads the other as a number: the plain arm runs where the value is one
    ("gamma = model.gamma() if learned else 0.99\n            loss = loss * gamma",
     "seen.append(gamma.item() if learned else gamma)"),
    ("aux = out.abs().mean() if use_aux else 0.0\n            loss = loss + aux",
     "seen.append(aux if isinstance(aux, float) else aux.item())"),
    # a weight both share (`loss *= w` back-propagated, `w * loss.item()` kept) carries no graph
    ("w = len(x) / n\n            loss *= w", "seen.append(w * loss.item() * scale)"),
], ids=["learned_or_number", "float_or_tensor", "shared_weight"])
def test_values_kept_as_numbers(more, keep):
    assert findings(KEPT_AS_NUMBERS.format(more=more, keep=keep), "TL007") == []


def test_an_addition_into_a_dict_raises_instead_of_keeping():
    """`other += loss` where `other` is a dict raises TypeError at the first batch: no total grows."""
    src = KEPT_BY.replace("{start}", "total = {k: 0.0 for k in heads}").replace("{keep}", "total += loss")
    assert findings(src, "TL007") == []
    assert findings(KEPT_BY.replace("{start}", "total = 0.0").replace("{keep}", "total += loss"), "TL007") == [(9, 9)]
    # an entry of the dict adds up: `total["loss"] += loss` keeps every graph
    entry = KEPT_BY.replace("{start}", "total = defaultdict(float)").replace("{keep}", 'total["loss"] += loss')
    assert findings(entry, "TL007") == [(9, 9)]


_OUTPUT_DICT = """
        history = []
        for batch in loader:
            output = model(**batch)
            loss = output["loss"]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            history.append({{"loss": loss.item(), "kept": output[{key}]}})
        """


def test_a_score_entry_of_the_models_output_dict_is_not_known_to_carry_a_graph():
    """`output["metric"]`: a model that returns a dict computes such entries for reporting (scores, counts)."""
    assert findings(_OUTPUT_DICT.format(key='"metric"'), "TL007") == []
    assert findings(_OUTPUT_DICT.format(key='"accuracy"'), "TL007") == []


def test_a_tensor_entry_of_the_models_output_dict_keeps_its_graph():
    assert findings(_OUTPUT_DICT.format(key='"logits"'), "TL007") == [(9, 5)]


_SCORE_HELPER = """
        def score(pred, target, eps=1e-7):
            {body}

        def fit(model, loader, optimizer, criterion, epochs):
            for epoch in range(epochs):
                total = 0.0
                for images, masks in loader:
                    optimizer.zero_grad()
                    pred = model(images)
                    loss = criterion(pred, masks)
                    total += score(pred, masks)
                    loss.backward()
                    optimizer.step()
                print(total / len(loader))
        """


def test_a_helper_that_passes_its_arguments_graph_on_to_what_it_returns():
    """A dice score of the model's output keeps the output's graph: the epoch's total keeps every batch's."""
    body = "inter = torch.sum(pred * target)\n            union = pred.sum() + target.sum()\n            " \
           "return (2. * inter + eps) / (union + eps)"
    assert findings(_SCORE_HELPER.format(body=body), "TL007") == [(14, 13)]


@pytest.mark.parametrize("body", [
    "return (pred.argmax(1) == target).float().mean()",        # a comparison: no graph
    "return torch.sum(pred.detach() * target)",                 # cut in the helper
    "return float(torch.sum(pred * target))",                   # a number
    "return compute(pred, target)",                             # a call of unknown effect
])
def test_a_helper_that_does_not_pass_its_arguments_graph_on(body):
    assert findings(_SCORE_HELPER.format(body=body), "TL007") == []


def test_a_helper_of_another_project_file_that_passes_its_arguments_graph_on(tmp_path):
    (tmp_path / "metrics.py").write_text(
        "import torch\n\n\ndef dice(pred, target, eps=1e-7):\n    inter = torch.sum(pred * target)\n"
        "    return (2. * inter + eps) / (pred.sum() + target.sum() + eps)\n")
    (tmp_path / "train.py").write_text(
        "from metrics import dice\n\n\ndef fit(model, loader, optimizer, criterion):\n    total = 0.0\n"
        "    for x, y in loader:\n        optimizer.zero_grad()\n        out = model(x)\n"
        "        loss = criterion(out, y)\n        total += dice(out, y)\n        loss.backward()\n"
        "        optimizer.step()\n    return total / len(loader)\n")
    code, out = lint_in_process(tmp_path, "--select", "TL007", ".")
    assert [(d["path"], d["line"]) for d in json.loads(out)] == [("train.py", 10)]


_HAND_WRITTEN = """
        class Adaline:
            def __init__(self, n):
                self.weight = torch.zeros(n, 1)

            def forward(self, x):
                return torch.mm(x, self.weight).view(-1)

            def backward(self, x, yhat, y):
                return torch.mm(x.t(), (yhat - y).view(-1, 1)) / y.size(0)

        def mse(yhat, y):
            return torch.mean((yhat - y) ** 2)

        def train(model, x, y, epochs):
            cost = []
            for e in range(epochs):
                yhat = model.forward(x)
                {update}
                curr_loss = mse(yhat, y)
                cost.append(curr_loss)
            return cost

        cost = train({made}, x, y, 10)
        """


@pytest.mark.parametrize("update,made", [
    ("model.weight -= 0.1 * model.backward(x, yhat, y)", "Adaline(2)"),  # gradients by hand: no module
    ("model.weight -= 0.1", "Adaline(2)"),                               # every call hands a plain object
])
def test_a_model_named_parameter_that_is_no_module_gives_no_graph(update, made):
    assert findings(_HAND_WRITTEN.format(update=update, made=made), "TL007") == []


def test_a_model_named_parameter_not_known_to_be_plain_keeps_its_graph():
    """No call of the file says what `model` holds: named like a module, by convention it is one."""
    src = _HAND_WRITTEN.format(update="mse(model(x), y).backward()", made="nn.Linear(2, 1)").replace(
        "cost = train(nn.Linear(2, 1), x, y, 10)", "")
    assert findings(src, "TL007") == [(21, 9)]


def _handed_total(tmp_path, helper_body):
    (tmp_path / "utils.py").write_text(f"def report(total):\n    {helper_body}\n")
    (tmp_path / "train.py").write_text(
        "from utils import report\n\n\ndef fit(model, loader, optimizer, criterion, epochs):\n"
        "    for epoch in range(epochs):\n        total = 0.0\n        for x, y in loader:\n"
        "            optimizer.zero_grad()\n            loss = criterion(model(x), y)\n            total += loss\n"
        "            loss.backward()\n            optimizer.step()\n        report(total / len(loader))\n")
    code, out = lint_in_process(tmp_path, "--select", "TL007", "--no-cache", ".")
    return [(d["path"], d["line"]) for d in json.loads(out)]


def test_a_total_handed_to_another_files_function_that_only_reads_it(tmp_path):
    """`report(total)` of another project file detaches what it gets: it back-propagates nothing."""
    assert _handed_total(tmp_path, "print(total.detach().cpu().numpy())") == [("train.py", 10)]


def test_a_total_handed_to_another_files_function_that_back_propagates_it(tmp_path):
    assert _handed_total(tmp_path, "total.backward()") == []


def test_no_fix_for_a_total_of_a_dicts_entries():
    """The entries of an output dict may mix tensors with plain numbers (`ntokens`): `.detach()` would raise."""
    src, _ = POSITIVE["every_entry_of_an_output_dict_whose_loss_entry_is_back_propagated"]
    assert fixed(src, "TL007") == textwrap.dedent(src)


def test_a_loss_from_a_method_to_be_overridden_is_known_by_its_backward():
    """`_train_step` of a base trainer returns what `_forward_step` does, whose body is `pass` (a subclass overrides
    it): the loss is back-propagated, so it carries a graph, and the epoch's total keeps each one."""
    src = """
        class BaseTrainer:
            def _forward_step(self, batch):
                \"\"\"Overridden by each model's trainer.\"\"\"
                pass

            def _train_step(self, batch):
                return self._forward_step(batch)

            def _train_epoch(self):
                epoch_sum_loss = 0.0
                for batch in self.loader:
                    loss = self._train_step(batch)
                    self.accelerator.backward(loss)
                    self.optimizer.step()
                    self.optimizer.zero_grad()
                    epoch_sum_loss += loss
                return epoch_sum_loss / len(self.loader)
        """
    assert findings(src, "TL007") == [(17, 13)]


def test_a_total_started_with_the_first_loss_under_its_none_test_is_kept():
    """`if running is None: running = loss` starts the total once; the additions after it keep every loss's graph
    across the loop like `running = 0` would (the start is no reset of each iteration)."""
    src = """
        def train(model, opt, loader, crit, steps):
            running = None
            for x, y in loader:
                opt.zero_grad()
                loss = crit(model(x), y)
                loss.backward()
                opt.step()
                if running is None:
                    running = loss
                else:
                    running += loss
            return running / steps
        """
    assert findings(src, "TL007") == [(12, 13)]
    reset = src.replace("if running is None:", "if steps > 0:")
    assert findings(reset, "TL007") == []


_ENSEMBLE = """
    class Agent:
        def update_critics(self, states, actions, target):
            per_sample = []
            for critic, critic_opt in zip(self.critics, self.critic_opts):
                kl = kl_divergence(critic(states, actions), target)
                per_sample.append(kl)
                loss = kl.mean()
                critic_opt.zero_grad()
                loss.backward()
                critic_opt.step()
            self.priorities = torch.stack(per_sample).max(0).values.detach()

        def train(self, buffer):
            for step in range(self.steps):
                {loop}
"""


def test_a_list_filled_once_per_network_of_an_ensemble():
    """One KL per critic, kept for the priorities and dropped when the method returns: a pass per optimizer it
    steps counts networks, not batches. The same list kept on the object across the steps keeps every graph."""
    assert findings(_ENSEMBLE.format(loop="self.update_critics(*buffer.sample())"), "TL007") == []
    carried = _ENSEMBLE.replace("per_sample = []\n            ", "").replace("per_sample", "self.per_sample")
    assert findings(carried.format(loop="self.update_critics(*buffer.sample())"), "TL007") == [(6, 13)]


def test_per_state_gradients_a_forward_returns():
    """A force field's forward takes one gradient per energy state, with `create_graph=self.training`, and returns
    them joined: an output the caller's loss goes through, not a log kept across training steps."""
    src = """
    class Force(nn.Module):
        def forward(self, coords):
            energy = self.net(coords)
            grads = []
            for i in range(energy.shape[-1]):
                g = torch.autograd.grad(energy[..., i].sum(), coords, create_graph={flag}, retain_graph=True)[0]
                grads.append(g.unsqueeze(-1))
            return -torch.cat(grads, dim=-1)
    """
    assert findings(src.format(flag="self.training"), "TL007") == []
    assert findings(src.format(flag="True"), "TL007") == []


def test_a_count_of_correct_predictions_kept_across_the_epoch():
    """`torch.eq(pred.argmax(1), y).sum()` and the like compare indices: no graph to keep, however `pred` was made.
    The loss added uncut is still reported."""
    src = """
    accu_num = torch.zeros(1)
    accu_loss = torch.zeros(1)
    for images, labels in loader:
        pred = model(images)
        pred_classes = torch.max(pred, dim=1)[1]
        accu_num += torch.eq(pred_classes, labels).sum()
        loss = crit(pred, labels)
        loss.backward()
        accu_loss += {loss}
        opt.step()
        opt.zero_grad()
    """
    assert findings(src.format(loss="loss.detach()"), "TL007") == []
    assert findings(src.format(loss="loss"), "TL007") == [(10, 5)]


EPISODE_AGENT = textwrap.dedent("""
    import torch
    from torch.distributions import Categorical


    class Agent:
        def __init__(self, policy, lr=1e-3):
            self.policy = policy
            self.optimizer = torch.optim.Adam(policy.parameters(), lr=lr)
            self.log_probs, self.rewards = [], []

        def act(self, state):
            dist = Categorical(logits=self.policy(torch.as_tensor(state)))
            action = dist.sample()
            return action.item(), dist.log_prob(action)

        def store(self, log_prob, reward):
            self.log_probs.append(log_prob)
            self.rewards.append(reward)

        def update(self):
            returns = torch.tensor(self.rewards).flip(0).cumsum(0).flip(0)
            {update}
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.log_probs, self.rewards = [], []

        def run_episode(self, env):
            state, done = env.reset(), False
            while not done:
                action, log_prob = self.act(state)
                state, reward, done, _ = env.step(action)
                self.store(log_prob, reward)
            self.update()


    def train(agent, env, episodes):
        for _ in range(episodes):
            agent.run_episode(env)
""")


@pytest.mark.parametrize("update", [
    "loss = -(torch.stack(self.log_probs) * returns).sum()",
    "loss = sum(-lp * r for lp, r in zip(self.log_probs, returns))",
])
def test_an_agent_that_back_propagates_the_log_probs_it_stores_keeps_them_on_purpose(update):
    """REINFORCE's episode buffer: the object keeps each step's log-probability with its graph for the backward of
    its own `update()`, which then empties it."""
    assert findings(EPISODE_AGENT.format(update=update), "TL007") == []


def test_an_agent_whose_backward_reads_other_attributes_than_the_stored_ones_still_keeps_graphs():
    """Nothing reads the stored log-probabilities, and nothing empties them: every step's graph stays."""
    src = EPISODE_AGENT.format(update="loss = -(self.policy(torch.zeros(4)).sum() * returns.mean())")
    src = src.replace("self.log_probs, self.rewards = [], []\n\n    def run", "self.rewards = []\n\n    def run")
    assert findings(src, "TL007") == [(34, 13)]


ROLLOUT_AGENT = textwrap.dedent("""
    import torch


    class Agent:
        def __init__(self, actor, critic):
            self.actor, self.critic = actor, critic
            self.optimizer = torch.optim.Adam(actor.parameters())
            self.log_probs, self.values = [], []

        def store(self, log_prob, value):
            self.log_probs.append(log_prob)
            self.values.append(value)

        def update(self):
            loss = -torch.stack(self.log_probs).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            {after}

        def empty(self):
            self.log_probs.clear()
            self.values.clear()

        def run(self, env, steps):
            state = env.reset()
            for t in range(steps):
                dist = self.actor(state)
                action = dist.sample()
                self.store(dist.log_prob(action), self.critic(state))
                state = env.step(action)
                if t % 5 == 4:
                    self.update()
""")


def test_a_value_a_rollout_buffer_keeps_until_the_update_empties_it_lives_one_update():
    """The critic's values are kept with their graphs, never back-propagated, but the update empties the buffer
    (through a helper of the class): they live five steps, not the whole run."""
    assert findings(ROLLOUT_AGENT.format(after="self.empty()"), "TL007") == []


def test_a_value_kept_by_an_object_that_no_update_empties_still_keeps_graphs():
    assert findings(ROLLOUT_AGENT.format(after="self.log_probs.clear()"), "TL007") == [(31, 13)]


POLICY_GRADIENT_STEP = textwrap.dedent("""
    import torch


    def run(env, policy, optimizer, episodes):
        for _ in range(episodes):
            state, done, total = env.reset(), False, 0
            while not done:
                probs = torch.softmax(policy.heads(torch.as_tensor(state))["action"], dim=-1)
                action = torch.multinomial(probs, 1).item()
                state, reward, done, _ = env.step(action)
                optimizer.zero_grad()
                loss = -torch.log(probs[action]) * reward
                loss.backward()
                optimizer.step()
                total += {kept}
            print(total)
""")


def test_the_return_weighting_a_log_probability_is_no_term_of_the_loss():
    """`-log(p) * reward`: the reward weighs the log-probability, which carries the graph; summing the rewards keeps
    no graph."""
    assert findings(POLICY_GRADIENT_STEP.format(kept="reward"), "TL007") == []


def test_the_loss_of_a_policy_gradient_step_kept_in_a_total_is_still_reported():
    assert findings(POLICY_GRADIENT_STEP.format(kept="loss"), "TL007") == [(16, 13)]


PER_CALL = """
import torch


class Learner:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def get_loss(self, batch):
        mean_loss = torch.tensor(0.)
        for x, y in zip(*batch):
            loss = self.model(x, y)
            loss.backward()
            mean_loss += loss
        return mean_loss

    def train(self, loader):
        for batch in loader:
            self.optimizer.zero_grad()
            loss = self.get_loss(batch)
            self.optimizer.step()

    def evaluate(self, loader):
        for batch in loader:
            _ = self.get_loss(batch)
"""


def test_a_per_call_total_of_one_steps_micro_batches_is_not_kept_across_steps():
    """`get_loss` back-propagates each task of one batch and sums them; the loop that calls it steps after each
    call and rebinds the result: the total holds one step's graphs, dropped at the next call."""
    assert findings(PER_CALL, "TL007") == []


@pytest.mark.parametrize("old, new", [
    ("            self.optimizer.step()\n", ""),                            # no caller steps after the call
    ("    def train(self, loader):\n        for batch in loader:\n",       # a call outside any loop
     "    def train(self, loader):\n        if loader:\n"),
    ("            loss.backward()\n",                                     # the function steps itself
     "            loss.backward()\n            self.optimizer.step()\n"),
])
def test_a_total_of_a_function_not_run_once_per_step_is_still_reported(old, new):
    assert old in PER_CALL
    src = PER_CALL.replace(old, new)
    assert findings(src, "TL007") == [(src.splitlines().index("            mean_loss += loss") + 1, 13)]
