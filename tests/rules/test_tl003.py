"""TL003 detached term in a loss sum."""

import textwrap

import pytest

from tests.helpers import findings, fixed, messages

POSITIVE = {
    "losses_copied_into_a_tensor_then_rewrapped_by_variable": (
        """
        for inp, tgt in batches:
            outs = net(inp)
            parts = [crit(o, tgt) for o in outs]
            err = torch.tensor(parts).sum()
            err = Variable(err, requires_grad=True)
            opt.zero_grad()
            err.backward()
            opt.step()
        """,
        [(5, 11)],
    ),
    # the critic's values of `logits, value = net(s)` (reshaped) copied into a new tensor by name, then the
    # critic's squared error on that copy: the critic trains nothing
    "critic_values_appended_then_copied_by_name": (
        """
        def update(net, opt, states, returns, actions):
            values, logps = [], []
            for j in range(len(states)):
                logits, value = net(states[j])
                value = value.view(-1)
                values.append(value)
                logps.append(F.log_softmax(logits, 0)[actions[j]])
            V = torch.Tensor(values)
            critic = (returns - V).pow(2).mean()
            policy = -(torch.stack(logps) * (returns - V)).mean()
            opt.zero_grad()
            (policy + 0.5 * critic).backward()
            opt.step()
        """,
        [(9, 9)],
    ),
    "predictions_copied_by_name_into_a_criterion": (
        """
        for x, y in loader:
            preds = []
            for xi in x:
                preds.append(model(xi))
            stacked = torch.FloatTensor(preds)
            loss = F.mse_loss(stacked, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
        [(6, 15)],
    ),
    # -- a helper that returns several losses as a tuple, one of them detached ------------------------------
    "helper_tuple_item": (
        """
        def compute_losses(out, y):
            ce = F.cross_entropy(out, y)
            reg = out.pow(2).mean()
            return ce, reg.item()

        for x, y in loader:
            ce, reg = compute_losses(model(x), y)
            loss = ce + 0.1 * reg
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
        [(5, 16)],
    ),
    "helper_tuple_detach_summed_inline": (
        """
        def losses(model, batch):
            out = model(batch)
            return out.mean(), out.std().detach()

        for batch in loader:
            main_loss, aux = losses(model, batch)
            (main_loss + aux).backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
        [(4, 24)],
    ),
    "helper_tuple_float_third_item": (
        """
        def parts(model, x):
            y = model(x)
            return y.sum(), float(y.max()), y.min()

        for x in data:
            a, b, c = parts(model, x)
            total = a + b + c
            total.backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
        [(4, 21)],
    ),
    # -- a helper (or a loss module's forward) that returns a sum with a term it detached ------------------------
    "helper_returns_a_sum_with_an_item": (
        """
        def compute_loss(model, x, y):
            out = model(x)
            l1 = F.l1_loss(out, y)
            l2 = F.mse_loss(out, y)
            return l1 + l2.item()

        for x, y in loader:
            optimizer.zero_grad()
            loss = compute_loss(model, x, y)
            loss.backward()
            optimizer.step()
        """,
        [(6, 17)],
    ),
    "helper_binds_the_sum_then_returns_it": (
        """
        def objective(pred, target):
            fit = (pred - target).pow(2).mean()
            total = fit + 0.5 * pred.abs().mean().detach()
            return total

        for x, y in loader:
            optimizer.zero_grad()
            cost = objective(net(x), y)
            cost.backward()
            optimizer.step()
        """,
        [(4, 25)],
    ),
    "loss_module_forward_returns_a_detached_term": (
        """
        class SmoothLoss(nn.Module):
            def forward(self, pred, target):
                mse = ((pred - target) ** 2).mean()
                smooth = (pred[:, 1:] - pred[:, :-1]).abs().mean().detach()
                return mse + 0.1 * smooth

        crit = SmoothLoss()
        for x, y in loader:
            optimizer.zero_grad()
            loss = crit(net(x), y)
            loss.backward()
            optimizer.step()
        """,
        [(5, 18)],
    ),
    "item_of_a_forward_output_beside_one_that_is_back_propagated": (
        """
        for x, y in loader:
            optimizer.zero_grad()
            logits, aux = model(x)
            ce = F.cross_entropy(logits, y)
            aux_loss = aux.mean().item()
            loss = ce + 0.1 * aux_loss
            loss.backward()
            optimizer.step()
        """,
        [(6, 16)],
    ),
    "criterion_given_only_a_cut_prediction": (
        """
        for x, y in loader:
            optimizer.zero_grad()
            out = model(x)
            rec = F.mse_loss(out.detach(), y)
            reg = sum(p.pow(2).sum() for p in model.parameters())
            loss = rec + 1e-4 * reg
            loss.backward()
            optimizer.step()
        """,
        [(5, 22)],
    ),
    "seed_data_index": (
        """
        total_loss = Variable(torch.zeros(1).cuda(), requires_grad=True)
        for batch_idx, (input, target) in enumerate(train_loader):
            output = net(input)
            loss = F.nll_loss(output, target)
            total_loss = total_loss + loss.data[0]
            if batch_idx % real_batchsize == 0:
                ave_loss = total_loss / real_batchsize
                ave_loss.backward()
                optimizer.step()
        """,
        [(6, 31)],
    ),
    "item_in_sum": (
        """
        for x, y in loader:
            loss_a = crit(model(x), y)
            loss_b = aux_loss(model)
            loss = loss_a + loss_b.item()
            loss.backward()
        """,
        [(5, 21)],
    ),
    "detach_in_sum_function": (
        """
        def step(model, batch, opt):
            out = model(batch)
            recon_loss = F.mse_loss(out, batch)
            kl = kl_div(out)
            total = kl + 0.5 * recon_loss.detach()
            total.backward()
            opt.step()
        """,
        [(6, 24)],
    ),
    "float_wrapper": (
        """
        for x, y in loader:
            l = criterion(model(x), y)
            objective = reg + float(l)
            objective.backward()
        """,
        [(4, 23)],
    ),
    "dot_data": (
        """
        for x, y in loader:
            loss = criterion(model(x), y)
            total = penalty + loss.data
            total.backward()
        """,
        [(4, 23)],
    ),
    "append_item_then_sum": (
        """
        losses = []
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            losses.append(loss.item())
            if i % 8 == 7:
                batch_loss = sum(losses) + reg
                batch_loss.backward()
        """,
        [(5, 19)],
    ),
    "method_self_attrs": (
        """
        class Trainer:
            def train_step(self, batch):
                for micro in batch:
                    self.loss = self.criterion(self.model(micro.x), micro.y)
                    self.total = self.total + self.loss.item()
                    self.total.backward()
        """,
        [(6, 39)],
    ),
    "augassign_detached": (
        """
        for epoch in range(3):
            total = 0
            for x, y in loader:
                ce_loss = criterion(model(x), y)
                total += ce_loss.detach()
            total.backward()
        """,
        [(6, 18)],
    ),
    "direct_in_backward": (
        """
        for x, y in loader:
            main_loss = crit(model(x), y)
            (aux + main_loss.detach()).backward()
        """,
        [(4, 12)],
    ),
    "weight_from_config_times_item": (
        """
        def train(model, loader, opt, args):
            for x, y in loader:
                ce = crit(model(x), y)
                aux = aux_loss(model)
                loss = ce + args.alpha * aux.item()
                loss.backward()
                opt.step()
        """,
        [(6, 34)],
    ),
    "weight_attribute_times_detached_kl": (
        """
        class Trainer:
            def step(self, x, y):
                ce = self.crit(self.model(x), y)
                kl_loss = self.kl(self.model)
                loss = ce + self.cfg.beta * kl_loss.detach()
                loss.backward()
        """,
        [(6, 37)],
    ),
    "detached_term_in_a_weighted_product": (
        """
        for x, y in loader:
            reg_loss = sum(p.pow(2).sum() for p in model.parameters())
            loss = (crit(model(x), y) + reg_loss.data) * weight
            loss.backward()
        """,
        [(4, 33)],
    ),
    "sum_of_items_from_a_generator": (
        """
        for x, y in loader:
            losses = [crit(head(x), y) for head in heads]
            loss = crit(model(x), y) + sum(l.item() for l in losses)
            loss.backward()
        """,
        [(4, 36)],
    ),
    "stack_of_one_detached_head": (
        """
        for x, y in loader:
            loss_a = crit(head_a(x), y)
            loss_b = crit(head_b(x), y)
            torch.stack([loss_a.detach(), loss_b]).sum().backward()
        """,
        [(5, 18)],
    ),
    "list_of_items_summed_into_the_loss": (
        """
        for x, y in loader:
            parts = []
            for head in heads:
                part_loss = crit(head(x), y)
                parts.append(part_loss.item())
            loss = crit(model(x), y) + sum(parts)
            loss.backward()
        """,
        [(6, 22)],
    ),
    "item_rewrapped_as_a_leaf": (
        """
        for x, y in loader:
            loss = crit(model(x), y)
            loss = torch.tensor(loss.item(), requires_grad=True)
            loss.backward()
            opt.step()
        """,
        [(4, 12)],
    ),
    "data_rewrapped_in_a_variable": (
        """
        for x, y in loader:
            total = crit(model(x), y) + crit(aux(x), y)
            loss = Variable(total.data, requires_grad=True)
            loss.backward()
        """,
        [(4, 12)],
    ),
    "sum_of_items_rewrapped": (
        """
        def train(model, loader, opt):
            for x, y in loader:
                losses = [crit(h(x), y) for h in model.heads]
                loss = sum(l.item() for l in losses)
                loss = torch.tensor(loss, requires_grad=True)
                loss.backward()
                opt.step()
        """,
        [(6, 16)],
    ),
    # -- chains of cuts (`.detach().item()`): the innermost operand is what was detached -------------------
    "chained_detach_item_rebinding": (
        """
        for x, y in loader:
            out = model(x)
            adv = criterion(disc(out), y)
            adv = adv.detach().item()
            loss = criterion(out, y) + adv
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
        [(5, 11)],
    ),
    "chained_data_item_inline": (
        """
        for x, y in loader:
            aux_loss = F.mse_loss(model.aux(x), y)
            loss = F.mse_loss(model(x), y) + aux_loss.data.item()
            loss.backward()
        """,
        [(4, 38)],
    ),
    "chained_detach_cpu_numpy_weighted": (
        """
        for x, y in loader:
            kl = F.kl_div(model(x), y)
            loss = crit(model(x), y) + beta * kl.detach().cpu().numpy()
            loss.backward()
        """,
        [(4, 39)],
    ),
    # -- the result of a criterion's call, detached (its kind unknown: known by the function it calls) ------
    "criterion_call_detached": (
        """
        for imgs, labels in loader:
            s_feat, logits = student(imgs)
            t_feat, _ = teacher(imgs)
            distill = feature_crit(s_feat, t_feat).detach() * cfg.weight
            total = head_criterion(logits, labels) + distill
            total.backward()
            opt.step()
            opt.zero_grad()
        """,
        [(5, 15)],
    ),
    # -- losses copied into a new tensor: `torch.tensor(list_of_losses)` ---------------------------------------
    "losses_copied_into_a_tensor_returned_by_forward": (
        """
        class Recommender(nn.Module):
            def forward(self, feats):
                extra_costs = []
                for head in self.heads:
                    feats, head_loss = head(feats)
                    extra_costs.append(head_loss)
                return self.out(feats), torch.mean(torch.tensor(extra_costs))

        def fit(model, loader):
            for x, y in loader:
                out, extra = model(x)
                (crit(out, y) + extra).backward()
        """,
        [(8, 44)],
    ),
    "losses_copied_into_a_tensor_in_the_backpropagated_sum": (
        """
        for x, y in loader:
            pred, rec_loss, kl_loss = vae(x)
            total = crit(pred, y) + torch.Tensor([rec_loss, kl_loss]).to(dev).sum()
            total.backward()
        """,
        [(4, 29)],
    ),
    "loss_stepped_then_its_items_summed_after_the_loop": (
        """
        total = 0
        for x, y in loader:
            loss = F.mse_loss(model(x), y)
            loss.backward()
            total = total + loss.detach()
        total.backward()
        """,
        [(6, 21)],
    ),
    "detached_value_of_a_loss_not_back_propagated_elsewhere": (
        """
        def learn(self, obs, nxt, r, logp):
            v = self.critic(obs)
            target = r + 0.9 * self.critic(nxt)
            actor_loss = -logp.mean() + F.mse_loss(v, target).detach()
            actor_loss.backward()
        """,
        [(5, 33)],
    ),
    "graph_loss_copied_by_variable_with_requires_grad": (
        """
        for inp, tgt in batches:
            loss = criterion(model(inp), tgt)
            loss = Variable(loss, requires_grad=True)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
        [(4, 12)],
    ),
    "list_comprehension_of_losses_copied_into_a_new_tensor": (
        """
        for inp, tgt in batches:
            parts = [crit(head, tgt) for head in net(inp)]
            err = torch.tensor(parts, requires_grad=True).sum()
            opt.zero_grad()
            err.backward()
            opt.step()
        """,
        [(4, 11)],
    ),
    # setting the flag works only on a leaf (a value with a graph raises): where it runs, backward trains nothing
    "requires_grad_set_on_a_loss_of_argmax_predictions": (
        """
        for inp, tgt in batches:
            pred = net(inp).argmax(1).float()
            err = ((pred - tgt) ** 2).mean()
            err.requires_grad = True
            opt.zero_grad()
            err.backward()
            opt.step()
        """,
        [(5, 5)],
    ),
    "requires_grad_set_on_a_criterion_loss": (
        """
        for inp, tgt in batches:
            err = crit(net(inp), tgt)
            err.requires_grad = True
            opt.zero_grad()
            err.backward()
            opt.step()
        """,
        [(4, 5)],
    ),
    "loss_computed_in_numpy_then_made_a_leaf": (
        """
        for inp, tgt in batches:
            guess = net(inp).detach().cpu().numpy()
            err = torch.from_numpy(((guess - tgt) ** 2).mean(keepdims=True))
            err.requires_grad = True
            opt.zero_grad()
            err.backward()
            opt.step()
        """,
        [(5, 5)],
    ),
    # a module's learnable parameter (on one branch of its configuration) read only through a cut: it never gets a
    # gradient and stays at its initial value; a test of it (`is not None`) is not a read
    "learnable_parameter_read_only_detached": (
        """
        import torch
        from torch import nn

        class Encoder(nn.Module):
            def __init__(self, n, dim, learned=True):
                super().__init__()
                if learned:
                    self.pos_embed = nn.Parameter(torch.zeros(1, n, dim))
                else:
                    self.pos_embed = sinusoid_table(n, dim)
                self.proj = nn.Linear(dim, dim)

            def forward(self, x):
                if self.pos_embed is not None:
                    x = x + self.pos_embed.type_as(x).to(x.device).clone().detach()
                return self.proj(x)
        """,
        [(16, 21)],
    ),
    # the same through `.data` and an index (a position table cut to the sequence), and inside a product
    "learnable_parameters_read_through_data": (
        """
        import torch
        from torch import nn

        class Encoder(nn.Module):
            def __init__(self, vocab, dim, max_len):
                super().__init__()
                self.tokens = nn.Embedding(vocab, dim)
                self.pos_embedding = nn.Parameter(torch.randn(1, max_len, dim))
                self.weight = nn.Parameter(torch.randn(dim, dim))

            def forward(self, ids):
                x = self.tokens(ids)
                x = x + self.pos_embedding.data[:, :x.shape[1], :]
                return torch.matmul(x, self.weight.data)
        """,
        [(14, 17), (15, 32)],
    ),
    # SAC's actor loss: the critic's value of the action the policy just produced, cut, is a constant, so the
    # actor gets no gradient through the critic (also through a dict of critics, as a method)
    "critic_value_of_the_policy_action_cut_in_the_actor_loss": (
        """
        import torch

        def update(policy, critic, policy_opt, batch):
            obs = batch["obs"]
            action, log_pi = policy(obs)
            q = critic(obs, action)
            actor_loss = (0.2 * log_pi - q.detach()).mean()
            policy_opt.zero_grad()
            actor_loss.backward()
            policy_opt.step()
        """,
        [(8, 34)],
    ),
    "critic_dict_value_of_the_policy_action_cut_in_the_actor_loss": (
        """
        import torch

        class Trainer:
            def __init__(self, policy, qf, optimizers):
                self.policy = policy
                self.qf = qf
                self.optimizers = optimizers

            def train_policy(self, obs):
                new_actions, log_pi = self.policy(obs)
                q_new = torch.min(self.qf["q1"](obs, new_actions), self.qf["q2"](obs, new_actions))
                policy_loss = (0.1 * log_pi - q_new.detach()).mean()
                self.optimizers["policy"].zero_grad()
                policy_loss.backward()
                self.optimizers["policy"].step()
        """,
        [(13, 39)],
    ),
    # two flags whose defaults both choose the parameter (`elif`: the fixed table only when asked for)
    "learnable_parameter_on_by_default_under_two_flags": (
        """
        import torch
        from torch import nn

        class Encoder(nn.Module):
            def __init__(self, n, dim, absolute=True, learned=True):
                super().__init__()
                if absolute and learned:
                    self.pos_embed = nn.Parameter(torch.zeros(1, n, dim))
                elif absolute:
                    self.pos_embed = sinusoid_table(n, dim)
                else:
                    self.pos_embed = None

            def forward(self, x):
                if self.pos_embed is not None:
                    x = x + self.pos_embed.clone().detach()
                return x
        """,
        [(17, 21)],
    ),
    # the term is bound afresh only under an option the loss's line does not test: with it off, the loss adds the
    # float the previous iteration logged
    "logged_float_reaching_the_loss_when_an_option_is_off": (
        """
        def train(cfg, model, loader, optimizer):
            cov_loss = torch.zeros(())
            for x, y in loader:
                output = model(x)
                if cfg.coverage:
                    log_p, cov_loss = output
                else:
                    log_p = output
                loss = F.nll_loss(log_p, y) + cov_loss.mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                cov_loss = cov_loss.item()
        """,
        [(14, 20)],
    ),
}

NEGATIVE = {
    # the discriminator's loss on one arm cuts `fake`; the other arm hands `fake` to a helper: never one pass
    "cut_on_one_arm_and_a_helper_given_the_sample_on_the_other": """
        for real, _ in loader:
            fake = netG(torch.randn(real.size(0), nz))
            if use_mixup:
                d_loss = bce(netD(real), ones) + bce(netD(fake.detach()), zeros)
            else:
                d_loss, score = discriminator_loss(netD, real, fake, bce)
            opt_d.zero_grad()
            d_loss.backward()
            opt_d.step()
        """,
    # the copy only weighs the log-probabilities (a baseline cut on purpose); the critic trains on the values
    "critic_values_copied_only_as_a_weight": """
        def update(net, opt, states, returns, actions):
            values, logps = [], []
            for j in range(len(states)):
                logits, value = net(states[j])
                values.append(value)
                logps.append(F.log_softmax(logits, 0)[actions[j]])
            V = torch.Tensor(values)
            policy = -(torch.stack(logps) * (returns - V)).mean()
            critic = F.mse_loss(torch.stack(values), returns)
            opt.zero_grad()
            (policy + critic).backward()
            opt.step()
        """,
    "losses_copied_into_a_tensor_only_for_logging": """
        history = []
        for x, y in loader:
            batch_loss = crit(model(x), y)
            batch_loss.backward()
            history.append(batch_loss)
        print(torch.tensor(history).mean())
        """,
    "numbers_copied_into_a_tensor_in_the_sum": """
        for x, y in loader:
            seen = []
            for part in parts:
                seen.append(part_loss(model(x), part).item())
            weights = torch.tensor(seen)
            total = crit(model(x), y) + torch.tensor(seen).mean()
            total.backward()
        """,
    "forward_returning_counts_in_a_tensor": """
        class Tagger(nn.Module):
            def forward(self, tokens):
                lengths = []
                for seq in tokens:
                    lengths.append(len(seq))
                return self.rnn(tokens), torch.tensor(lengths)
        """,
    "forward_of_a_plain_class_is_not_a_module": """
        class Meter:
            def forward(self, costs):
                kept = []
                for c in costs:
                    kept.append(c.loss)
                return torch.tensor(kept)
        """,
    "straight_through_estimator_in_the_loop": """
        for x, y in loader:
            optimizer.zero_grad()
            z = net(x)
            q = torch.round(z)
            out = z + (q - z).detach()
            loss = out.mean()
            loss.backward()
            optimizer.step()
        """,
    "straight_through_estimator_in_a_quantizer_module": """
        class Quantize(nn.Module):
            def forward(self, x):
                q = torch.round(x)
                return x - (x - q).detach()

        quant = Quantize()
        for x, y in loader:
            optimizer.zero_grad()
            out = quant(net(x))
            loss = out.mean()
            loss.backward()
            optimizer.step()
        """,
    "helper_returns_a_loss_weighted_by_a_detached_factor": """
        def weighted(model, x, y):
            out = model(x)
            ce = F.cross_entropy(out, y)
            return ce * out.var().detach()

        for x, y in loader:
            optimizer.zero_grad()
            loss = weighted(model, x, y)
            loss.backward()
            optimizer.step()
        """,
    "helper_sum_with_an_item_only_logged": """
        def compute_loss(model, x, y):
            out = model(x)
            return F.l1_loss(out, y) + F.mse_loss(out, y).item()

        for x, y in loader:
            optimizer.zero_grad()
            out = model(x)
            F.l1_loss(out, y).backward()
            optimizer.step()
            print(compute_loss(model, x, y))
        """,
    "helper_returns_an_actor_critic_loss_with_a_detached_baseline": """
        def a2c_loss(net, obs, actions, returns):
            logits, value = net(obs)
            logp = F.log_softmax(logits, dim=1).gather(1, actions)
            adv = returns - value.detach()
            policy = -(logp * adv).mean()
            critic = F.mse_loss(value, returns)
            return policy + critic

        for obs, actions, returns in loader:
            optimizer.zero_grad()
            loss = a2c_loss(net, obs, actions, returns)
            loss.backward()
            optimizer.step()
        """,
    "baseline_detached_from_a_forward_output_beside_the_policy": """
        for obs, actions, returns in loader:
            optimizer.zero_grad()
            logits, value = net(obs)
            logp = F.log_softmax(logits, dim=1).gather(1, actions)
            adv = returns - value.detach()
            loss = -(logp * adv).mean() + F.mse_loss(value, returns)
            loss.backward()
            optimizer.step()
        """,
    "item_of_a_forward_output_under_no_grad": """
        for x, y in loader:
            optimizer.zero_grad()
            with torch.no_grad():
                _, ref = teacher(x)
            logits, aux = model(x)
            loss = F.cross_entropy(logits, y) + 0.1 * ref.mean().item()
            loss.backward()
            optimizer.step()
        """,
    "criterion_given_a_cut_target_beside_a_prediction": """
        for x, y in loader:
            optimizer.zero_grad()
            student, teacher = model(x), ema_model(x)
            loss = F.mse_loss(student, teacher.detach()) + F.cross_entropy(student, y)
            loss.backward()
            optimizer.step()
        """,
    "criterion_of_a_cut_prediction_only_logged": """
        for x, y in loader:
            optimizer.zero_grad()
            out = model(x)
            loss = F.cross_entropy(out, y)
            loss.backward()
            optimizer.step()
            print(F.mse_loss(out.detach(), y))
        """,
    "discriminator_loss_on_a_cut_fake": """
        for real in loader:
            fake = generator(torch.randn(8, 16))
            d_opt.zero_grad()
            d_loss = bce(discriminator(real), ones) + bce(discriminator(fake.detach()), zeros)
            d_loss.backward()
            d_opt.step()
        """,
    "critic_method_named_like_a_loss_given_a_cut_fake": """
        for real in loader:
            fake = generator(torch.randn(8, 16))
            d_opt.zero_grad()
            d_loss = critic.compute_loss(real, ones) + critic.compute_loss(fake.detach(), zeros)
            d_loss.backward()
            d_opt.step()
        """,
    "helper_tuple_item_only_logged": """
        def compute_losses(out, y):
            ce = F.cross_entropy(out, y)
            return ce, (out.argmax(1) == y).float().mean().item()

        for x, y in loader:
            ce, acc = compute_losses(model(x), y)
            print(acc)
            ce.backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
    "helper_tuple_item_used_as_weight": """
        def scored(model, x):
            out = model(x)
            return out.mean(), out.var().item()

        for x in data:
            loss, w = scored(model, x)
            (loss * w).backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
    "helper_tuple_detached_target": """
        def teacher_student(student, teacher, x):
            return student(x), teacher(x).detach()

        for x in data:
            s, t = teacher_student(student, teacher, x)
            F.mse_loss(s, t).backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
    "logging_item": """
        running_loss = 0.0
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            running_loss += loss.item()
        """,
    "gan_fake_detach": """
        for real in loader:
            fake = netG(z)
            d_loss = bce(netD(real), ones) + bce(netD(fake.detach()), zeros)
            d_loss.backward()
        """,
    "weight_from_detached_losses": """
        for x, y in loader:
            loss_a, loss_b = crit_a(model(x), y), crit_b(model(x), y)
            w = loss_b.detach() / loss_a.detach()
            loss = loss_a + w * loss_b
            loss.backward()
        """,
    "target_network_detach": """
        for s, a, r, s2 in buffer:
            target = r + gamma * target_net(s2).max(1)[0].detach()
            loss = F.smooth_l1_loss(q_net(s).gather(1, a), target)
            loss.backward()
        """,
    "print_item": """
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            print(f"loss {loss.item():.3f}")
        """,
    "history_append_item": """
        history = []
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            history.append(loss.item())
        """,
    "no_backward_in_function": """
        def evaluate(model, loader):
            total = 0
            for x, y in loader:
                loss = criterion(model(x), y)
                total = total + loss.item()
            return total
        """,
    "tensor_data_not_loss": """
        for x, y in loader:
            pred = model(x.data)
            loss = criterion(pred, y.data)
            loss.backward()
        """,
    "scalar_metric_with_item": """
        for x, y in loader:
            loss = criterion(model(x), y)
            acc = (model(x).argmax(1) == y).float().mean().item()
            loss.backward()
            meter.update(loss.item(), acc)
        """,
    "loss_rebound_to_its_number_after_backward": """
        previous = float("inf")
        for step in range(steps):
            optimizer.zero_grad()
            loss = model(batch).sum()
            loss.backward()
            loss = loss.item()
            assert loss <= previous
            previous = loss
            optimizer.step()
        """,
    "learnable_scalar_made_with_requires_grad": """
        log_var = torch.tensor(0.0, requires_grad=True)
        for x, y in loader:
            ce = crit(model(x), y)
            loss = ce * torch.exp(-log_var) + log_var
            loss.backward()
        """,
    "adversarial_input_rewrapped_as_a_leaf": """
        for x, y in loader:
            x_adv = torch.tensor(x.detach(), requires_grad=True)
            loss = crit(model(x_adv), y)
            loss.backward()
        """,
    "detached_weight_from_a_config_and_a_loss": """
        for x, y in loader:
            ce = crit(model(x), y)
            scale = args.gamma * ce.detach()
            loss = ce / scale
            loss.backward()
        """,
    "chained_detach_of_a_weight": """
        for x, y in loader:
            ce = crit(model(x), y)
            loss = ce * ce.detach().cpu().item()
            loss.backward()
        """,
    "chained_detach_into_the_discriminator": """
        for real in loader:
            fake = netG(z)
            d_loss = bce(netD(fake.detach().clone()), zeros) + bce(netD(real), ones)
            d_loss.backward()
        """,
    "chained_detach_of_a_count": """
        for x, y in loader:
            hits = (model(x).argmax(1) == y).sum()
            loss = crit(model(x), y) + 0 * hits.detach().cpu().item()
            loss.backward()
        """,
    "keeping_links_without_a_cut": """
        for x, y in loader:
            aux_loss = crit(model.aux(x), y)
            loss = crit(model(x), y) + aux_loss.cpu().float()
            loss.backward()
        """,
    "criterion_call_detached_as_a_weight": """
        for imgs, labels in loader:
            s_feat, logits = student(imgs)
            ratio = feature_crit(s_feat, s_feat.roll(1, 0)).detach()
            total = head_criterion(logits, labels) * ratio
            total.backward()
        """,
    "criterion_call_detached_only_logged": """
        for imgs, labels in loader:
            logits = student(imgs)
            total = head_criterion(logits, labels)
            shown = head_criterion(logits, labels).detach()
            total.backward()
            log(shown)
        """,
    "non_loss_call_detached_in_a_sum": """
        for imgs, labels in loader:
            logits = student(imgs)
            total = head_criterion(logits, labels) + centre(logits).detach().mean()
            total.backward()
        """,
    "critic_value_cut_in_the_actor_loss_trained_by_its_own_backward": """
        def learn(self, obs, nxt, r, logp):
            v = self.critic(obs)
            target = r + 0.9 * self.critic(nxt)
            critic_loss = F.mse_loss(v, target.detach())
            critic_loss.backward()
            adv = (target - v).detach()
            actor_loss = -adv * logp + 0.01 * -logp
            actor_loss.backward()
    """,
    "value_baseline_subtracted_with_its_own_loss": """
        def learn(self, obs, act):
            v = self.value_net(obs)
            q = self.q_net(obs, act)
            gap = q - v.detach()
            pi_loss = (self.temp * self.logp(obs) - gap).mean()
            v_loss = F.mse_loss(v, q.detach())
            pi_loss.backward()
            v_loss.backward()
    """,
    "input_wrapped_by_variable_for_input_gradients": """
        for inp, tgt in batches:
            inp = Variable(inp, requires_grad=True)
            err = crit(net(inp), tgt)
            opt.zero_grad()
            err.backward()
            opt.step()
        """,
    "requires_grad_set_on_a_loss_bound_again_before_its_backward": """
        for inp, tgt in batches:
            err = torch.zeros(1)
            err.requires_grad = True
            err = crit(net(inp), tgt)
            opt.zero_grad()
            err.backward()
            opt.step()
        """,
    "running_total_started_as_a_variable_of_zeros": """
        for inp, tgt in batches:
            total = Variable(torch.zeros(1), requires_grad=True)
            for head in net(inp):
                total = total + crit(head, tgt)
            opt.zero_grad()
            total.backward()
            opt.step()
        """,
    # parameters cut on purpose or also read whole: built without grad, frozen by its flag, updated by hand (a
    # running centre kept as a parameter), or read uncut in another method
    "parameters_cut_on_purpose_or_also_read_whole": """
        import torch
        from torch import nn

        class Head(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.table = nn.Parameter(torch.zeros(dim), requires_grad=False)
                self.frozen = nn.Parameter(torch.zeros(dim))
                self.frozen.requires_grad = False
                self.center = nn.Parameter(torch.zeros(dim))
                self.scale = nn.Parameter(torch.ones(dim))

            @torch.no_grad()
            def update_center(self, x):
                self.center.data = 0.9 * self.center.data + 0.1 * x.mean(0)

            def forward(self, x):
                x = x + self.table.detach() + self.frozen.detach() - self.center.detach()
                return x * self.scale.detach() + self.extra(x)

            def extra(self, x):
                return x * self.scale
        """,
    # a parameter whose cut value is only handed on, not computed with: a test policy's constant action
    "parameter_cut_only_to_be_handed_on": """
        import torch

        class ZeroPolicy(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.bias = torch.nn.Parameter(torch.zeros(1))

            def forward(self, tensordict):
                tensordict.set("action", self.bias.detach().clone())
                return tensordict
        """,
    # the cut value is also added uncut: `q - q.detach()` is zero with the gradient of `q`, on purpose
    "critic_value_added_with_its_own_cut": (
        """
        import torch

        def update(policy, critic, policy_opt, batch):
            obs = batch["obs"]
            action, log_pi = policy(obs)
            q = critic(obs, action)
            actor_loss = (0.2 * log_pi).mean() - (q - q.detach()).mean()
            policy_opt.zero_grad()
            actor_loss.backward()
            policy_opt.step()
        """
    ),
    # the critic's value of a logged action is cut inside a product with the log-probability: a weight
    "critic_value_of_a_logged_action_as_a_weight": (
        """
        import torch

        def update(policy, critic, policy_opt, batch):
            obs, act = batch["obs"], batch["act"]
            dist = policy(obs)
            q = critic(obs, act)
            actor_loss = -(dist.log_prob(act) * q.detach()).mean()
            policy_opt.zero_grad()
            actor_loss.backward()
            policy_opt.step()
        """
    ),
    # an actor-critic's baseline: the cut advantage weighs log-probabilities gathered in a list (whose kind is not
    # known): a weight, not a term, even though it comes from the same forward as the uncut log-probabilities
    "advantage_cut_beside_gathered_log_probabilities": (
        """
        import torch

        def update(model, optimizer, states, actions, returns):
            log_probs, values = [], []
            for s, a in zip(states, actions):
                dist, value = model(s)
                log_probs.append(dist.log_prob(a))
                values.append(value)
            log_probs = torch.cat(log_probs)
            values = torch.cat(values)
            advantage = returns - values
            loss = -(log_probs * advantage.detach()).mean() + 0.5 * advantage.pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """
    ),
    # SAC's temperature loss in a subclass: `self.log_alpha`, a leaf made to require grad, is bound by the base
    # class of the file; the cut entropy gap is its weight
    "temperature_loss_of_a_subclass": (
        """
        import torch

        class SAC:
            def __init__(self, policy):
                self.policy = policy
                self.log_alpha = torch.zeros(1, requires_grad=True)
                self.alpha_optim = torch.optim.Adam([self.log_alpha])
                self.target_entropy = -2.0


        class RecurrentSAC(SAC):
            def update(self, states):
                actions, log_pi = self.policy(states)
                alpha_loss = -(self.log_alpha * (log_pi + self.target_entropy).detach()).mean()
                self.alpha_optim.zero_grad()
                alpha_loss.backward()
                self.alpha_optim.step()
        """
    ),
    # a hinge whose threshold is the model's own other output, cut on purpose (X-DER's past-logits constraint):
    # computed from the forward by tensor operations alone, not by another model handed it
    "margin_threshold_cut_from_the_same_forward": (
        """
        import torch

        def step(model, optimizer, x, y, old, margin):
            logits = model(x)
            probs = torch.softmax(logits, 1)
            good, bad = probs[:, old:], probs[:, :old]
            constraint = bad.max(1)[0].detach() + margin - good.max(1)[0]
            mask = constraint > 0
            loss = torch.nn.functional.cross_entropy(logits, y) + constraint[mask].mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """
    ),
    # bucket edges kept as a parameter and read cut only by `torch.bucketize`, which has no gradient for them
    # anyway: fixed on purpose, the cut changes nothing
    "parameter_read_cut_only_as_bucket_edges": (
        """
        import torch
        from torch import nn

        class VarianceAdaptor(nn.Module):
            def __init__(self, n_bins, dim):
                super().__init__()
                self.pitch_bins = nn.Parameter(torch.linspace(0.0, 1.0, n_bins - 1))
                self.pitch_embedding = nn.Embedding(n_bins, dim)

            def forward(self, x, pitch):
                return x + self.pitch_embedding(torch.bucketize(pitch, self.pitch_bins.detach()))
        """
    ),
    # the same class whose defaults build the fixed table: the cut is written for it (the parameter's branch runs
    # only when a caller asks for it), and a test that is no argument of `__init__` with another table bound
    "learnable_parameter_off_by_default_beside_a_fixed_table": """
        import torch
        from torch import nn

        class Encoder(nn.Module):
            def __init__(self, n, dim, learned=False):
                super().__init__()
                if learned:
                    self.pos_embed = nn.Parameter(torch.zeros(1, n, dim))
                else:
                    self.pos_embed = sinusoid_table(n, dim)
                self.proj = nn.Linear(dim, dim)

            def forward(self, x):
                x = x + self.pos_embed.type_as(x).to(x.device).clone().detach()
                return self.proj(x)
        """,
    "learnable_parameter_by_configuration_beside_a_fixed_table": """
        import torch
        from torch import nn

        class Encoder(nn.Module):
            def __init__(self, cfg, n, dim):
                super().__init__()
                if cfg.learned_positions:
                    self.pos_embed = nn.Parameter(torch.zeros(1, n, dim))
                else:
                    self.pos_embed = sinusoid_table(n, dim)
                self.proj = nn.Linear(dim, dim)

            def forward(self, x):
                return self.proj(x + self.pos_embed.detach())
        """,
    # an option tested twice: the loss's term is bound afresh whenever it is read, the previous iteration's
    # logged float never reaches the loss (the paths that would carry it test `cfg.model` both ways)
    "logged_float_rebound_under_the_same_option_before_use": """
        def train(cfg, model, loader, optimizer):
            for x, y in loader:
                output = model(x)
                if cfg.model == "PG":
                    log_p, cov_loss = output
                else:
                    log_p = output
                nll = F.nll_loss(log_p, y)
                if cfg.model == "PG":
                    cov_loss = cov_loss.mean()
                else:
                    cov_loss = torch.zeros(())
                loss = nll + cfg.coverage * cov_loss
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                cov_loss = cov_loss.item()
                log(cov_loss)
        """,
    # an importance weight computed under no_grad (from gradients of a first pass) multiplies a criterion's
    # per-sample value: a weight, not a term
    "importance_weight_under_no_grad_multiplying_a_criterion": """
        import torch

        class Learner:
            def train_step(self, conf, imgs, labels):
                with torch.no_grad():
                    embeddings = self.model(imgs)
                embeddings.requires_grad_(True)
                thetas = self.head(embeddings, labels)
                loss = conf.ce_loss(thetas, labels)
                grad = torch.autograd.grad(loss, embeddings)[0].detach()
                with torch.no_grad():
                    gi = torch.norm(grad, dim=1)
                    wi = 1 / conf.batch_size * (1 / gi)
                embeddings = self.model(imgs)
                thetas = self.head(embeddings, labels)
                loss = (conf.ce_loss(thetas, labels, reduction="none") * wi).mean()
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
        """,
}


@pytest.mark.parametrize("name", POSITIVE)
def test_positive(name):
    src, expected = POSITIVE[name]
    assert findings(src, "TL003") == expected


@pytest.mark.parametrize("name", NEGATIVE)
def test_negative(name):
    assert findings(NEGATIVE[name], "TL003") == []


def test_fix_removes_wrapper():
    out = fixed(POSITIVE["seed_data_index"][0], "TL003")
    assert "total_loss = total_loss + loss\n" in out
    assert findings(out, "TL003") == []
    assert fixed(out, "TL003") == out


def test_fix_is_unsafe():
    src = POSITIVE["item_in_sum"][0]
    assert "loss_b.item()" in fixed(src, "TL003", unsafe=False)
    assert "loss = loss_a + loss_b\n" in fixed(src, "TL003", unsafe=True)


def test_fix_removes_the_whole_chain():
    out = fixed(POSITIVE["chained_detach_cpu_numpy_weighted"][0], "TL003")
    assert "loss = crit(model(x), y) + beta * kl\n" in out
    assert findings(out, "TL003") == []


def test_message():
    """The full text of the finding, so a change of wording is seen here."""
    assert messages(POSITIVE["helper_tuple_item"][0], "TL003") == [(
        5, 16,
        "`reg.item()` cuts `reg` out of the graph (.item()) before `compute_losses()` returns it, and "
        "the caller adds it into a loss that is back-propagated (as `reg`): this term gets no gradient; "
        "return `reg` itself",
    )]


SCORE_FUNCTION = """\
import torch
for state, action in batches:
    dist = policy(state)
    log_prob = dist.log_prob(action)
    advantage = critic(state) - baseline(state)
    pi_loss = (log_prob * (log_prob - advantage){cut}).mean()
    optimizer.zero_grad()
    pi_loss.backward()
    optimizer.step()
"""


def test_a_detached_weight_computed_from_its_own_factor_is_not_a_term():
    """`log_prob * (log_prob - advantage).detach()`: the score-function estimator differentiates `log_prob`,
    weighted by a value cut from the graph on purpose; the detach is required."""
    assert findings(SCORE_FUNCTION.format(cut=".detach()"), "TL003") == []


def test_a_detached_term_beside_a_factor_it_does_not_mention_is_still_reported():
    src = SCORE_FUNCTION.replace("log_prob * (log_prob - advantage){cut}", "2.0 * advantage.detach() + log_prob")
    assert findings(src, "TL003") == [(6, 22)]


def test_a_forward_copying_a_list_it_appends_to_is_read_in_a_file_that_never_back_propagates():
    """A package of models: the forward that returns losses it appended to a list, copied into a new tensor, is
    reported in its own file, where no backward is (the caller that trains is elsewhere)."""
    src = POSITIVE["losses_copied_into_a_tensor_returned_by_forward"][0].split("        def fit(")[0]
    assert findings(src, "TL003") == [(8, 44)]


def test_a_forward_copying_a_list_literal_in_a_file_that_never_back_propagates_is_not_read():
    """Most forwards of a package of models build `torch.tensor([...])` of constants: a file without a backward is
    read only where a list it appends to is copied by name (the rule page says so)."""
    src = """
        class Pair(nn.Module):
            def forward(self, x):
                a_cost, b_cost = self.a(x), self.b(x)
                return x, torch.tensor([a_cost, b_cost]).sum()
        """
    assert findings(src, "TL003") == []


# A penalty computed under no_grad from the model the loop trains, then added into its loss.
NO_GRAD_TERM = """\
import torch
for batch in loader:
    with torch.no_grad():
        old_logp = policy(batch.obs)
        ref_logp = reference(batch.obs)
        {penalty}
    new_logp = policy(batch.obs)
    {loss}
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

_KL = "kl = old_logp - ref_logp"
_PG = "loss = -(new_logp * batch.adv).mean()"


def _no_grad_term(penalty=_KL, loss=_PG + " + coef * kl.mean()"):
    return NO_GRAD_TERM.format(penalty=penalty, loss=loss)


@pytest.mark.parametrize("src, at", [
    (_no_grad_term(), (8, 52)),                                                    # a weighted, reduced term
    (_no_grad_term(loss=_PG + " + (coef * kl[batch.idx]).mean()"), (8, 53)),      # an item of it
    (_no_grad_term(penalty="kl = (old_logp - ref_logp) ** 2", loss=_PG + " + kl.sum() / n"), (8, 45)),
    (_no_grad_term(penalty="if approx:\n            kl = old_logp - ref_logp\n        else:\n"
                           "            kl = (old_logp - ref_logp) ** 2"), (11, 52)),  # every arm under no_grad
])
def test_a_term_computed_under_no_grad_from_the_trained_model_is_reported(src, at):
    assert findings(src, "TL003") == [at]


@pytest.mark.parametrize("src", [
    _no_grad_term(penalty="kl = ref_logp * 0.5"),                    # from a model never run with grad here
    _no_grad_term(loss="loss = -(new_logp * (batch.ret - old_logp)).mean()"),    # a baseline beside a graph factor
    _no_grad_term(loss="loss = ((new_logp - old_logp) ** 2).mean()"),            # a target, inside a power
    _no_grad_term(loss="loss = (new_logp - kl).mean()"),                          # a difference: a target
    _no_grad_term(loss="loss = torch.exp(new_logp - old_logp).mean() * coef"),   # an argument of a function
    _no_grad_term(loss="loss = new_logp.mean() + coef * kl.mean()").replace(
        "    with torch.no_grad():", "    if True:"),                  # not under no_grad: it carries a graph
    _no_grad_term(loss="kl = new_logp - ref_logp\n    " + _PG + " + coef * kl.mean()"),  # rebound with grad
    _no_grad_term(loss="picked = []\n    picked.append(torch.log(new_logp))\n    loss = picked[0] * kl"),  # a weight
])
def test_a_constant_meant_as_one_is_not_reported(src):
    assert findings(src, "TL003") == []


# A generator's loss whose adversarial term reads the fake through a cut: only the critic is reached.
CUT_INPUT = """\
import torch
import torch.nn.functional as F


class Pair(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gen = Maker(16)
        self.judge = Judge(16)

    def fit(self, loader, opt):
        for noise, real in loader:
            fake = self.gen(noise)
            score = self.judge({judged})
            {loss}
            opt.zero_grad()
            loss.backward()
            opt.step()
"""


def _cut_input(judged="fake.detach()", loss="loss = F.mse_loss(score, torch.ones_like(score)) + F.l1_loss(fake, real)"):
    return CUT_INPUT.format(judged=judged, loss=loss)


@pytest.mark.parametrize("src, at", [
    (_cut_input(), (14, 32)),
    (_cut_input(judged="fake.data"), (14, 32)),
    (_cut_input(loss="loss = -score.mean() + 10 * (fake - real).abs().mean() + F.mse_loss(fake, real)"), (14, 32)),
])
def test_an_adversarial_term_through_a_cut_input_is_reported(src, at):
    assert findings(src, "TL003") == [at]


@pytest.mark.parametrize("src", [
    _cut_input(loss="loss = F.mse_loss(score, torch.zeros_like(score)) + "
                    "F.mse_loss(self.judge(real), torch.ones_like(score))"),     # the critic's own loss
    _cut_input(loss="loss = F.mse_loss(score, torch.zeros_like(score)) + "
                    "F.mse_loss(self.judge(fake), torch.ones_like(score))"),     # both players in one loss
    _cut_input(judged="fake"),                                                  # not cut
    _cut_input(judged="noise", loss="loss = cosine(score, fake.detach()) + cosine(self.gen(real), fake)"),  # a function
    _cut_input(loss="loss = F.mse_loss(score, real) + len(fake) * 0"),               # only counted
    _cut_input(loss="loss = F.mse_loss(score, real) + F.mse_loss(self.gen.classify(fake), real)"),  # another module
    _cut_input(loss="if refit:\n                score = self.judge(fake)\n            "
                    "loss = F.mse_loss(score, real) + F.l1_loss(fake, real)"),   # the module also reads it attached
])
def test_a_cut_input_meant_as_one_is_not_reported(src):
    assert findings(src, "TL003") == []


@pytest.mark.parametrize("src, at", [
    (_cut_input(loss="loss = F.mse_loss(score, real) + 0.1 * F.mse_loss(real, fake.detach())"), (15, 69)),
    (_cut_input(judged="noise", loss="loss = F.mse_loss(self.gen(noise), real) + crit(fake.detach(), real) + "
                                     "F.l1_loss(fake, real)"), (15, 61)),
])
def test_a_criterion_handed_only_a_cut_output_is_reported(src, at):
    """The criterion's only input with a graph is the cut module output: its term gives no gradient at all."""
    assert findings(src, "TL003") == [at]


def test_a_copied_list_that_is_appended_to_under_another_name_is_not_read():
    """The prefilter's words must be one list: `torch.tensor(sizes)` beside `all_sizes.append(...)` is not it."""
    from torchlint.analysis.cuts import APPENDED_LIST as APPENDED_LIST_COPIED

    text = "def forward(self, x):\n    all_sizes.append(x)\n    my.sizes.append(x)\n    return torch.tensor(sizes)\n"
    assert APPENDED_LIST_COPIED.search(text) is None
    assert APPENDED_LIST_COPIED.search(text.replace("my.sizes", "sizes")) is not None
    assert APPENDED_LIST_COPIED.search(text.replace("my.sizes", "sizes").replace("forward", "fwd")) is None
    # a function named like a loss stands for the forward (its helper returns the copy), in a file that takes a
    # distribution's values
    loss_fn = text.replace("my.sizes", "sizes").replace("forward", "calc_Loss")
    assert APPENDED_LIST_COPIED.search(loss_fn) is None
    assert APPENDED_LIST_COPIED.search(loss_fn + "lp = pd.log_prob(a)\n") is not None


FORWARD_SUM_OF_COPY = """\
import torch
from torch import nn


class Recurrent(nn.Module):
    def forward(self, frames, target):
        {name} = []
        outs = []
        for t in range(frames.shape[1]):
            step = self.cell(frames[:, t])
            outs.append(step)
            {name}.append({value})
        extra = torch.mean(torch.tensor({name}).to(frames.device))
        pred = torch.stack(outs, 1)
        loss = self.mse(pred, target) + self.beta * extra
        return pred, loss
"""


def test_a_forward_returning_a_sum_of_a_copied_list_of_losses_is_reported():
    """The copy is a term of a name the forward returns (`loss = mse + beta * extra`, `extra` the mean of the
    copy), and the list, named like a loss, gets values of unknown kind: the penalty trains nothing."""
    src = FORWARD_SUM_OF_COPY.format(name="sep_loss", value="torch.abs(self.gap(step)).mean()")
    assert findings(src, "TL003") == [(13, 28)]


@pytest.mark.parametrize("name, value", [
    ("sep_loss", "torch.abs(self.gap(step)).mean().item()"),  # numbers: nothing to train
    ("gaps", "torch.abs(self.gap(step)).mean()"),  # a list not named like a loss, of values of unknown kind
])
def test_a_forward_copying_numbers_or_values_not_known_as_losses_is_not_reported(name, value):
    assert findings(FORWARD_SUM_OF_COPY.format(name=name, value=value), "TL003") == []


DUAL_UPDATE = """\
import torch
from torch import nn


class Tuner:
    def __init__(self, policy, prior):
        self.policy, self.prior = policy, prior
        self.log_scale = {leaf}
        self.scale_opt = torch.optim.Adam([self.log_scale], lr=1e-3)

    def update(self, obs):
        dist = self.policy(obs)
        gap = torch.distributions.kl.kl_divergence(dist, self.prior(obs))
        scale = {factor}
        scale_loss = -1 * (scale * (gap - 0.1).detach()).mean()
        self.scale_opt.zero_grad()
        scale_loss.backward()
        self.scale_opt.step()
"""


@pytest.mark.parametrize("leaf, factor", [
    ("torch.zeros(1, requires_grad=True)", "self.log_scale.exp()"),
    ("make_zeros(1, requires_grad=True)", "self.log_scale.exp()"),   # a helper given requires_grad=True
    ("nn.Parameter(torch.zeros(1))", "torch.exp(self.log_scale)"),
    ("torch.zeros(1, requires_grad=True)", "self.log_scale"),
])
def test_a_cut_value_weighting_a_learned_leaf_is_not_a_term(leaf, factor):
    """A dual variable's update (`-(scale * (kl - eps).detach()).mean()`, SAC's temperature): the product trains
    the leaf `scale` is computed from, weighted by a gap cut from the graph on purpose."""
    assert findings(DUAL_UPDATE.format(leaf=leaf, factor=factor), "TL003") == []


@pytest.mark.parametrize("leaf, factor", [
    ("torch.zeros(1)", "self.log_scale.exp()"),             # a tensor that requires no grad: no leaf trained
    ("torch.zeros(1, requires_grad=False)", "self.log_scale.exp()"),
    ("torch.zeros(1, requires_grad=True)", "torch.ones(1)"),  # a constant tensor, not the learned leaf
])
def test_a_cut_term_beside_a_factor_not_known_to_be_learned_is_still_reported(leaf, factor):
    assert findings(DUAL_UPDATE.format(leaf=leaf, factor=factor), "TL003") == [(15, 36)]


def test_a_cut_factor_of_a_loss_that_is_one_product_weights_the_other_factor():
    """`backward()` needs a graph, and the cut factor has none: the other factor of a loss back-propagated as one
    product carries it, whatever is known of its kind (here an attribute of another object): the cut is its weight."""
    assert findings(DUAL_UPDATE.format(leaf="torch.zeros(1, requires_grad=True)", factor="self.coef"), "TL003") == []


ONE_PRODUCT = """
import torch
import torch.nn.functional as F


class ActorCritic:
    def update(self, state, log_prob, reward, next_state):
        value = self.critic(state)
        advantage = reward + 0.99 * self.critic(next_state) - value
        critic_loss = F.mse_loss(value, (reward + 0.99 * self.critic(next_state)).detach())
        self.critic_opt.zero_grad()
        critic_loss.backward()
        self.critic_opt.step()
        {loss}
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()
"""


@pytest.mark.parametrize("loss", [
    "actor_loss = -log_prob * advantage.detach()",          # `log_prob`: a parameter, of unknown kind
    "actor_loss = -(log_prob * advantage.detach()).mean()",
    "actor_loss = (advantage.detach() * -log_prob).sum() / len(state)",
    "actor_loss = torch.mean(log_prob * self.scale * advantage.detach())",
])
def test_a_cut_advantage_weighting_a_parameter_of_unknown_kind_is_not_a_term(loss):
    assert findings(ONE_PRODUCT.format(loss=loss), "TL003") == []


@pytest.mark.parametrize("loss, at", [
    # the cut value multiplied by a number, beside a term of unknown kind or one with a graph: a term of the sum
    ("actor_loss = -advantage.detach() * 2 + log_prob", (14, 23)),
    ("actor_loss = -advantage.detach() * 2 + critic_loss", (14, 23)),
])
def test_a_cut_term_not_alone_in_a_product_is_still_reported(loss, at):
    assert findings(ONE_PRODUCT.format(loss=loss), "TL003") == [at]


SHIFTED = """
import torch
import torch.nn.functional as F


def contrastive_loss(features, labels, temperature=0.1):
    z = F.normalize(features, dim=1)
    sim = torch.matmul(z, z.T) / temperature
    {shift}
    logits = sim - {cut}
    log_prob = logits - torch.log(torch.exp(logits).sum(dim=1, keepdim=True))
    positives = torch.eye(len(labels))
    return -(positives * log_prob).sum(dim=1).mean()


model = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = contrastive_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("shift, cut", [
    ("logits_max, _ = sim.max(dim=1, keepdim=True)", "logits_max.detach()"),   # the log-sum-exp trick
    ("logits_max = torch.amax(sim, dim=1, keepdim=True)", "logits_max.detach()"),
    ("logits_max = sim.max(1, keepdim=True)[0]", "logits_max.data"),
    ("pass", "sim.logsumexp(dim=1, keepdim=True).detach()"),
])
def test_the_maximum_of_logits_cut_before_it_shifts_them_is_meant(shift, cut):
    """Softmax is unchanged by a constant shift: cutting the maximum only keeps the shift from being differentiated."""
    assert findings(SHIFTED.format(shift=shift, cut=cut), "TL003") == []


@pytest.mark.parametrize("shift, cut", [
    ("other = model(features).max(dim=1, keepdim=True)[0]", "other.detach()"),  # the maximum of another tensor
    ("_, logits_max = sim.max(dim=1, keepdim=True)", "logits_max.detach()"),    # the second item: indices
])
def test_a_cut_value_that_is_not_the_shifted_logits_maximum_is_still_reported(shift, cut):
    assert findings(SHIFTED.format(shift=shift, cut=cut), "TL003") == [(10, 20)]


KEPT_AS_LEAF = """\
import torch


class Agent:
    def act(self, state, record):
        pd = torch.distributions.Categorical(logits=self.policy(state))
        action = pd.sample()
        record.scores.append({kept})
        return action

    def policy_loss(self, advantages):
        scores = {leaf}
        return -(scores * advantages).mean()
"""


@pytest.mark.parametrize("kept, leaf", [
    ("pd.log_prob(action)", "torch.tensor(self.record.scores, requires_grad=True)"),
    ("pd.entropy()", "torch.tensor(self.record.scores, requires_grad=True)"),
    ("pd.log_prob(action)", "Variable(self.record.scores, requires_grad=True)"),
])
def test_a_list_of_log_probs_made_a_new_leaf_is_reported(kept, leaf):
    """The list an acting method fills with a policy's log-probs, copied into a new leaf with `requires_grad=True`
    where the loss is built: the file never back-propagates, and the copy drops every graph."""
    assert findings(KEPT_AS_LEAF.format(kept=kept, leaf=leaf), "TL003") == [(12, 18)]


@pytest.mark.parametrize("kept, leaf", [
    ("pd.log_prob(action).item()", "torch.tensor(self.record.scores, requires_grad=True)"),  # numbers
    ("float(action)", "torch.tensor(self.record.scores, requires_grad=True)"),
    ("pd.log_prob(action)", "torch.tensor(self.record.scores)"),         # no flag: not known to be trained
    ("pd.log_prob(action)", "torch.stack(self.record.scores)"),          # the graphs kept
    ("pd.log_prob(action)", "torch.tensor(self.record.weights, requires_grad=True)"),  # another list
])
def test_a_list_made_a_leaf_not_known_to_hold_graphs_is_not_reported(kept, leaf):
    assert findings(KEPT_AS_LEAF.format(kept=kept, leaf=leaf), "TL003") == []


def test_a_local_list_of_model_outputs_made_a_new_leaf_is_reported():
    src = """
        import torch

        def rollout(model, states):
            outs = []
            for s in states:
                outs.append(model(s).sum())
            return torch.tensor(outs, requires_grad=True)

        def init_scales(n):
            scales = []
            for i in range(n):
                scales.append(1.0 / (i + 1))
            return torch.tensor(scales, requires_grad=True)   # a learnable tensor made from numbers
        """
    assert findings(src, "TL003") == [(8, 12)]


def test_a_list_made_a_leaf_is_read_in_a_long_file_whose_other_functions_are_blanked():
    """Pruning keeps the function appending a distribution's values and the one making the leaf."""
    padding = "".join(f"\ndef unrelated_{i}(x):\n    return x + {i}\n" for i in range(30))
    src = KEPT_AS_LEAF.format(kept="pd.log_prob(action)", leaf="torch.tensor(self.record.scores, requires_grad=True)")
    assert findings(src + padding, "TL003") == [(12, 18)]


def test_the_text_of_a_list_made_a_leaf_needs_the_flag_and_an_append_of_that_name():
    from torchlint.analysis.cuts import APPENDED_LIST as APPENDED_LIST_MADE_LEAF

    text = "x = torch.tensor(self.a.scores, requires_grad=True)\nb.scores.append(v)\n"
    assert APPENDED_LIST_MADE_LEAF.search(text) is not None
    assert APPENDED_LIST_MADE_LEAF.search(text.replace("b.scores", "b.my_scores")) is None
    assert APPENDED_LIST_MADE_LEAF.search(text.replace("requires_grad=True", "requires_grad=False")) is None


HELPER_COPY = """\
import torch


class Learner:
    def scores(self, states, actions):
        out = []
        for s, a in zip(states, actions):
            pd = self.make_pd(self.net(s))
            lp = pd.log_prob(a)
            out.append({kept})
        return {copy}

    def {loss_fn}(self, states, actions, adv):
        {call}
        return -(lp * adv).mean()
"""


def _helper_copy(kept="lp", copy="torch.tensor(out)", loss_fn="policy_loss", call="lp = self.scores(states, actions)"):
    return HELPER_COPY.format(kept=kept, copy=copy, loss_fn=loss_fn, call=call)


def test_a_helper_returning_a_copy_of_log_probs_to_a_loss_function_is_reported():
    """The loss function (named like one) computes its loss from what the helper returns: a copy of the
    log-probs' values, with no path to the policy."""
    assert findings(_helper_copy(), "TL003") == [(11, 16)]
    assert findings(_helper_copy(copy="torch.tensor(out).to(states.device)"), "TL003") == [(11, 16)]


@pytest.mark.parametrize("src", [
    _helper_copy(kept="lp.item()"),                                       # numbers
    _helper_copy(copy="torch.stack(out)"),                                # the graphs kept
    _helper_copy(loss_fn="evaluate"),                                     # not a loss function, no backward
    _helper_copy(call="with torch.no_grad():\n            lp = self.scores(states, actions)"),  # constants
    _helper_copy(kept="len(a)"),
    # a loss function with no backward in its file: only a distribution's values are followed (the prefilter)
    _helper_copy(kept="self.net(s).sum()").replace("lp = pd.log_prob(a)", "pass"),
])
def test_a_helper_copy_not_known_to_feed_a_loss_is_not_reported(src):
    assert findings(src, "TL003") == []


def test_a_helper_copy_reaching_a_backward_is_reported_once():
    src = _helper_copy(loss_fn="update") + (
        "        loss = -(self.scores(states, actions) * adv).mean() + (lp * adv).mean()\n"
        "        loss.backward()\n"
    )
    assert findings(src.replace("        return -(lp * adv).mean()\n", ""), "TL003") == [(11, 16)]


def test_a_helper_copy_of_model_outputs_reaching_a_backward_is_not_reported():
    """Other model outputs may be targets copied on purpose (`returns.append(r + gamma * v)`): only a
    distribution's values are followed."""
    src = _helper_copy(kept="self.net(s).sum()", loss_fn="update").replace("lp = pd.log_prob(a)", "pass")
    src = src.replace("        return -(lp * adv).mean()\n", "        (lp * adv).mean().backward()\n")
    assert findings(src, "TL003") == []
    assert findings(src.replace("self.net(s).sum()", "pd.rsample()").replace("pass", "pd = self.make_pd(s)"),
                    "TL003") == [(11, 16)]


def test_a_cut_loss_weighted_by_a_learned_leaf_is_still_a_term():
    """Uncertainty weighting with the task loss cut (`exp(-log_var) * task_loss.detach() + log_var`): the product
    trains `log_var`, but the task loss trains nothing; a loss, by its name, is not a dual variable's gap."""
    src = DUAL_UPDATE.format(leaf="nn.Parameter(torch.zeros(1))", factor="self.log_scale.exp()").replace(
        "scale_loss = -1 * (scale * (gap - 0.1).detach()).mean()",
        "task_loss = gap.mean()\n        scale_loss = scale * task_loss.detach() + self.log_scale")
    assert findings(src, "TL003") == [(16, 30)]


# A module's parameters are leaves that require grad: a norm of one cut by `.item()` adds a constant to the loss.
PARAMETER_POSITIVE = {
    "l2_penalty_summed_from_items_in_a_generator": (
        """
        for x, y in loader:
            optimizer.zero_grad()
            l2 = sum(p.norm(2).item() for p in model.parameters())
            loss = criterion(model(x), y) + 1e-4 * l2
            loss.backward()
            optimizer.step()
        """,
        [(4, 14)],
    ),
    "l2_penalty_added_in_a_loop_over_named_parameters": (
        """
        for x, y in loader:
            optimizer.zero_grad()
            reg = 0
            for name, p in model.named_parameters():
                reg += p.pow(2).sum().item()
            loss = criterion(model(x), y) + wd * reg
            loss.backward()
            optimizer.step()
        """,
        [(6, 16)],
    ),
}

PARAMETER_NEGATIVE = {
    "penalty_kept_in_the_graph": """
        for x, y in loader:
            optimizer.zero_grad()
            l2 = sum(p.norm(2) for p in model.parameters())
            loss = criterion(model(x), y) + 1e-4 * l2
            loss.backward()
            optimizer.step()
        """,
    "names_only_of_named_parameters": """
        for x, y in loader:
            optimizer.zero_grad()
            n = sum(len(name.split(".")) for name, p in model.named_parameters())
            loss = criterion(model(x), y) + 0 * n
            loss.backward()
            optimizer.step()
        """,
    "norm_logged_under_no_grad": """
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                norm = sum(p.norm().item() for p in model.parameters())
            log(loss + norm)
        """,
}


@pytest.mark.parametrize("name", sorted(PARAMETER_POSITIVE))
def test_parameter_positive(name):
    src, expected = PARAMETER_POSITIVE[name]
    assert findings(src, "TL003") == expected


@pytest.mark.parametrize("name", sorted(PARAMETER_NEGATIVE))
def test_parameter_negative(name):
    assert findings(PARAMETER_NEGATIVE[name], "TL003") == []


# A term reduced or weighed after the `no_grad` block that computed it is cut all the same.
NO_GRAD_CHAIN = """
    for batch in batches:
        output = self.adapter.forward(**batch)
        loss = -(output.adv * output.ratio).mean()
        with torch.no_grad():
            ref = self.adapter.forward(**batch)
            kl = ((output.pred - ref.pred) ** 2).mean(dim=1)
        {after}
        loss += kl_loss
        self.accelerator.backward(loss)
        self.optimizer.step()
        self.optimizer.zero_grad()
"""


def test_no_grad_term_weighed_after_its_block():
    src = NO_GRAD_CHAIN.replace("{after}", "kl = torch.mean(kl)\n        kl_loss = self.args.kl_beta * kl")
    assert findings(src, "TL003") == [(10, 13)]
    (_, _, message), = messages(src, "TL003")
    assert "`kl_loss` is computed under `torch.no_grad()` (`kl` is bound there)" in message


def test_no_grad_term_joined_with_a_graph_after_its_block():
    """`kl_loss` carries the graph of its other term: only `kl`, the cut part, is reported (at its use)."""
    src = NO_GRAD_CHAIN.replace("{after}", "kl_loss = self.args.kl_beta * kl + (output.pred ** 2).mean()")
    (line, _, message), = messages(src, "TL003")
    assert line == 8 and message.startswith("`kl` is computed under `torch.no_grad()`")


# -- a loss made a new leaf by re-wrapping its values (issue 27, family 5) -----------------------------------------
REWRAP = """
    for x, y in loader:
        optimizer.zero_grad()
        out = model(x)
        {lines}
        loss.backward()
        optimizer.step()
"""

REWRAP_POSITIVE = {
    # a list written out of criterion values, copied into a leaf: its values, not their graphs
    "written_list_made_a_leaf": ("parts = [criterion(out, y), out.abs().mean()]\n"
                                 "        loss = torch.tensor(parts, requires_grad=True).sum()", (6, 12)),
    "written_list_inline": ("loss = torch.tensor([criterion(out, y), out.pow(2).mean()], requires_grad=True).mean()",
                            (5, 12)),
    # `.detach().requires_grad_()`: a new leaf of the loss's value
    "detached_then_required": ("loss = criterion(out, y).clone().detach().requires_grad_(True)", (5, 12)),
    "detached_then_required_bare": ("loss = criterion(out, y).detach().requires_grad_()", (5, 12)),
    # numbers read from the graph copied into a new tensor among the loss's terms
    "item_in_a_new_tensor": ("loss = criterion(out, y) + torch.tensor(0.1 * out.abs().mean().item())", (5, 51)),
    "items_in_a_new_list_tensor": ("loss = torch.FloatTensor([criterion(out, y).item()])\n"
                                   "        loss.requires_grad = True", (5, 31)),
}


@pytest.mark.parametrize("name", sorted(REWRAP_POSITIVE))
def test_rewrapped_loss(name):
    lines, where = REWRAP_POSITIVE[name]
    assert findings(REWRAP.replace("{lines}", lines), "TL003") == [where]


REWRAP_NEGATIVE = {
    # a learnable weight made on purpose, beside the model's loss
    "learnable_scalar": "log_var = torch.tensor(0.0, requires_grad=True)\n"
                        "        loss = criterion(out, y) * torch.exp(-log_var) + log_var",
    # an adversarial input made a leaf and fed to the model: the loss keeps the model's graph
    "input_made_a_leaf": "x_adv = x.detach().requires_grad_(True)\n        loss = criterion(model(x_adv), y)",
    # a list of constants copied into a tensor, used as a weight
    "constant_weights": "w = torch.tensor([1.0, 2.0, 0.5], requires_grad=True)\n        loss = (w * criterion(out, y)).sum()",
    # a number copied into a tensor and used as a weight of the loss
    "copied_weight": "loss = criterion(out, y) * torch.tensor(scale.item())",
    # `.requires_grad_(False)` freezes, it does not re-wrap
    "required_false": "loss = criterion(out, y) + out.detach().requires_grad_(False).sum() * 0",
}


@pytest.mark.parametrize("name", sorted(REWRAP_NEGATIVE))
def test_rewrapped_look_alikes(name):
    assert findings(REWRAP.replace("{lines}", REWRAP_NEGATIVE[name]), "TL003") == []


def test_a_number_copied_into_a_tensor_has_no_fix():
    """`torch.tensor(reg.item())`: using `reg` itself inside the copy would still cut it, so nothing is offered."""
    src = REWRAP.replace("{lines}", "loss = criterion(out, y) + torch.tensor(out.abs().mean().item())")
    assert len(messages(src, "TL003")) == 1
    assert fixed(src, "TL003", unsafe=True) == textwrap.dedent(src)


def test_a_loss_method_of_the_class_given_a_cut_sample_may_run_the_critic():
    """`self.discriminator_loss(real.data, fake.data)`: the method runs the discriminator on the cut sample, whose
    parameters are the graph of that loss; cutting the generator out of it is what a critic's step wants."""
    src = """
        class Generator(nn.Module):
            def forward(self, z):
                return self.net(z)


        class GAN:
            def __init__(self):
                self.gen = Generator()

            def discriminator_loss(self, real, fake):
                return self.disc(fake).mean() - self.disc(real).mean()

            def fit(self, loader):
                for real in loader:
                    fake = self.gen(noise())
                    self.opt_d.zero_grad()
                    d_loss = self.discriminator_loss(real.data, fake.data)
                    d_loss.backward()
                    self.opt_d.step()
    """
    assert findings(src, "TL003") == []


def test_a_latent_made_a_leaf_for_guidance_is_no_loss():
    """`latents.detach().requires_grad_()` in a sampler that takes gradients of a guidance score: not a loss; the
    rule reads it without failing (a `.requires_grad_()` call has no argument to copy)."""
    src = """
        def guide(latents, score_fn, weights, seen):
            w = torch.tensor(weights, dtype=torch.float32)
            latents = latents.detach().requires_grad_()
            score = score_fn(latents) * w
            seen.append(score.item())
            grads = torch.autograd.grad(score, latents)[0]
            return latents + grads
    """
    assert findings(src, "TL003") == []


_FORWARD_CUT = """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(3, 4)
                self.head = nn.Linear(4, 1)

            def forward(self, x):
                feats = self.enc(x)
                return self.head(feats), {feats}

        model = Net()
        for x, y, pos in loader:
            logits, feats = model(x)
            _, pos_feats = model(pos)
            loss = F.cross_entropy(logits, y) + 0.5 * F.mse_loss(feats, {target})
            opt.zero_grad()
            loss.backward()
            opt.step()
        """


def test_a_criterion_given_only_outputs_the_models_forward_cut():
    """`return logits, feats.detach()`: the contrastive term built from `feats` trains nothing."""
    src = _FORWARD_CUT.format(feats="feats.detach()", target="pos_feats")
    assert findings(src, "TL003") == [(16, 58)]
    assert "in `model`'s forward" in messages(src, "TL003")[0][2]


def test_a_criterion_given_a_cut_output_beside_one_with_a_graph_is_a_target():
    """`mse(feats, target)` with `target` from another call that keeps its graph: the cut output is a target."""
    src = _FORWARD_CUT.format(feats="feats.detach()", target="logits")
    assert findings(src, "TL003") == []


def test_outputs_the_forward_returns_uncut_are_not_read_as_cut():
    src = _FORWARD_CUT.format(feats="feats", target="pos_feats")
    assert findings(src, "TL003") == []


def test_a_forward_that_detaches_its_whole_output_cuts_a_criterion_of_it():
    src = """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(3, 1)

            def forward(self, x):
                return self.body(x).data

        model = Net()
        for x, y in loader:
            loss = F.mse_loss(model(x), y) + reg.pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    assert findings(src, "TL003") == [(12, 23)]


def test_a_frozen_encoder_detached_inside_the_forward_is_fine():
    """`h = self.enc(x).detach()` then `return self.head(h)`: a frozen backbone; the head still trains."""
    src = """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(3, 4)
                self.head = nn.Linear(4, 1)

            def forward(self, x):
                h = self.enc(x).detach()
                return self.head(h)

        model = Net()
        for x, y in loader:
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    assert findings(src, "TL003") == []


def test_a_list_of_losses_copied_and_made_a_leaf_by_hand():
    """`torch.tensor(loss_list).sum()` then `loss.requires_grad = True`: the copy has no graph."""
    src = """
        for x, y in loader:
            out = model(x)
            loss_list = [criterion(out, y), out.abs().mean()]
            loss = torch.tensor(loss_list).sum()
            loss.requires_grad = True
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    assert findings(src, "TL003") == [(5, 12)]


def test_a_model_judging_its_own_cut_reconstruction_is_by_design():
    """`rec = vae.decoder(z)`, then `vae(rec.detach())` in the encoder's loss beside `mse(rec, x)`: the term trains
    the model's encoder on its reconstruction as a fixed input; the cut keeps it from reaching back through `z`."""
    src = """
        for x in loader:
            mu, logvar = vae.encode(x)
            rec = vae.decoder(reparameterize(mu, logvar))
            rec_mu, rec_logvar, _, _ = vae(rec.detach())
            loss = F.mse_loss(rec, x) + kl(rec_mu, rec_logvar).exp().mean()
            opt_e.zero_grad()
            loss.backward()
            opt_e.step()
        """
    assert findings(src, "TL003") == []
    gan = src.replace("vae(rec.detach())", "discriminator(rec.detach())")
    assert findings(gan, "TL003") == [(5, 46)]


_NO_GRAD_OF_A_GRAPH = """
        def train(generator, encoder, loader, opt):
            for z, c, target in loader:
                fake = generator(z)
                with torch.no_grad():
                    emb = encoder({encoded})
                emb_loss = {term}
                loss = F.mse_loss(fake, target) + emb_loss
                opt.zero_grad()
                loss.backward()
                opt.step()
        """


@pytest.mark.parametrize("term", ["F.mse_loss(emb, c)", "emb.mean()", "1 - F.cosine_similarity(emb, c).mean()"])
def test_a_term_computed_under_no_grad_from_a_tensor_with_a_graph(term):
    """`encoder(fake)` under `no_grad`: the term built from it would train the generator; it trains nothing."""
    assert findings(_NO_GRAD_OF_A_GRAPH.format(encoded="fake", term=term), "TL003") == [(8, 43)]


def test_a_term_computed_under_no_grad_from_the_batch_is_a_constant_on_purpose():
    assert findings(_NO_GRAD_OF_A_GRAPH.format(encoded="c", term="F.mse_loss(emb, c)"), "TL003") == []


@pytest.mark.parametrize("student", ["student(x)", "student.features(x)"])
def test_a_teacher_under_no_grad_beside_a_student_is_a_target(student):
    """Distillation: the teacher's output is a constant beside the student's features (known or not)."""
    src = f"""
        def train(student, teacher, loader, opt):
            for x, y in loader:
                s = {student}
                with torch.no_grad():
                    t = teacher(x)
                loss = F.cross_entropy(s, y) + F.mse_loss(s, t)
                opt.zero_grad()
                loss.backward()
                opt.step()
        """
    assert findings(src, "TL003") == []


def test_a_td_target_under_no_grad_beside_the_critics_own_output():
    """`F.smooth_l1_loss(self.critic_net(s), target_v)`: the critic's output carries the graph; the target is a
    constant on purpose, whatever graph `next_state` may have come from."""
    src = """
        class Agent:
            def update(self, state, next_state, reward):
                with torch.no_grad():
                    target_v = reward + 0.99 * self.critic_net(next_state)
                for index in batches:
                    value_loss = F.smooth_l1_loss(self.critic_net(state[index]), target_v[index])
                    self.critic_optimizer.zero_grad()
                    value_loss.backward()
                    self.critic_optimizer.step()
        """
    assert findings(src, "TL003") == []


_NUMBERS = """
        def train(model, loader, opt, crit):
            for x, y in loader:
                out = model(x)
                {reg}
                loss = crit(out, y) + 0.1 * reg
                opt.zero_grad()
                loss.backward()
                opt.step()
        """


@pytest.mark.parametrize("reg, at", [
    ("reg = torch.from_numpy(out.pow(2).mean().detach().cpu().numpy())", (5, 32)),
    ("reg = np.mean(out.detach().cpu().numpy() ** 2)", (5, 23)),
    ("reg = math.exp(-out.abs().mean().item())", (5, 25)),
])
def test_a_term_computed_by_numpy_from_a_cut_value_is_reported_without_a_fix(reg, at):
    """NumPy (or `math`, or `torch.from_numpy`) computes numbers from the cut value: the term has no graph, and there
    is no tensor to put in the cut's place inside the call, so no fix is offered."""
    src = _NUMBERS.format(reg=reg)
    assert findings(src, "TL003") == [at]
    assert fixed(src, "TL003", unsafe=True) == textwrap.dedent(src)


@pytest.mark.parametrize("reg", [
    "reg = np.mean(y.cpu().numpy())",  # a statistic of the batch: no graph to cut
    "reg = torch.from_numpy(np.ones(3)).sum()",
    "reg = np.log(2.0) * out.mean()",
])
def test_numpy_values_without_a_cut_graph_are_not_reported(reg):
    assert findings(_NUMBERS.format(reg=reg), "TL003") == []


def test_a_numpy_weight_of_a_loss_with_a_graph_is_a_weight():
    """`w * ce` with `w` computed by NumPy from a cut value: the product still carries `ce`'s graph."""
    src = """
        for x, y in loader:
            out = model(x)
            w = np.exp(-out.detach().cpu().numpy().mean())
            loss = crit(out, y) * w
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    assert findings(src, "TL003") == []


_LIST_OF_TERMS = """
        for x, y in loader:
            out = model(x)
            losses = [crit(out, y), out.abs().mean(){cut}]
            loss = {combined}
            opt.zero_grad()
            loss.backward()
            opt.step()
        """


@pytest.mark.parametrize("combined", ["sum(losses)", "torch.stack(losses).sum()"])
def test_a_cut_item_of_a_list_literal_of_terms_is_reported(combined):
    assert findings(_LIST_OF_TERMS.format(cut=".detach()", combined=combined), "TL003") == [(4, 29)]
    assert findings(_LIST_OF_TERMS.format(cut="", combined=combined), "TL003") == []


def test_a_tuple_record_whose_first_entry_is_back_propagated_is_not_a_list_of_terms():
    src = """
        for x, y in loader:
            out = model(x)
            pair = (crit(out, y), out.abs().mean().detach())
            loss = pair[0]
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    assert findings(src, "TL003") == []


def test_a_cut_value_stored_in_a_dict_whose_values_are_summed_is_reported():
    src = """
        for x, y in loader:
            out = model(x)
            losses = {}
            losses["ce"] = crit(out, y)
            losses["l1"] = out.abs().mean().item()
            loss = sum(losses.values())
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    assert findings(src, "TL003") == [(6, 20)]


_RETURNED_CRITERION = """
        def cos_loss(a, b):
            return 1 - F.cosine_similarity(a, {b}, dim=1).mean()

        def get_loss(model, teacher, x, y, args):
            feats, logits = model(x)
            with torch.no_grad():
                t_feats = teacher(x)
            total = F.cross_entropy(logits, y)
            kd = cos_loss(t_feats, feats.detach())
            total += kd * args.kd_weight
            return total, logits

        def train(model, teacher, loader, opt, args):
            for x, y in loader:
                loss, _ = get_loss(model, teacher, x, y, args)
                opt.zero_grad()
                loss.backward()
                opt.step()
        """


def test_a_criterion_given_only_a_cut_input_in_what_a_helper_returns_is_reported():
    """Distillation whose student features are cut before the criterion (of the file, computing with tensor
    functions only): the term the helper adds into the loss its caller back-propagates trains nothing."""
    src = _RETURNED_CRITERION.format(b="b")
    assert findings(src, "TL003") == [(10, 28)]
    assert "in what `get_loss()` returns" in messages(src, "TL003")[0][2]


def test_a_criterion_of_the_file_that_runs_a_module_is_not_known_to_be_one():
    """`cos_loss` calls a helper of its own: it may run a trained module on the cut input."""
    assert findings(_RETURNED_CRITERION.format(b="project(b)"), "TL003") == []


def test_a_teacher_output_under_no_grad_is_no_input_with_a_graph_beside_a_cut_student():
    """`F.mse_loss(t, s.detach())` with `t = teacher(x)` under `no_grad`: the teacher's output has no graph, so the
    cut student is the criterion's only input that had one."""
    src = """
        for x, y in loader:
            s = student(x)
            with torch.no_grad():
                t = teacher(x)
            loss = F.cross_entropy(s, y) + F.mse_loss(t, s.detach())
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    assert findings(src, "TL003") == [(6, 50)]


def test_numbers_stored_by_key_beside_the_returned_loss_entry_are_logs():
    """The helper returns a dict of the loss and numbers for the log, stored by key; the caller back-propagates
    the loss entry only."""
    src = """
        def losses(model, x, y):
            out = model(x)
            kl = out.pow(2).mean()
            logs = {"loss": F.cross_entropy(out, y) + kl}
            logs["kl"] = kl.item()
            return logs, out

        def train(model, loader, opt):
            for x, y in loader:
                logs, _ = losses(model, x, y)
                opt.zero_grad()
                logs["loss"].backward()
                opt.step()
        """
    assert findings(src, "TL003") == []


@pytest.mark.parametrize("read, found", [
    ('rec["loss"]', []),  # the loss entry: not what is stored under "pred"
    ('sum(rec.values())', [(6, 19)]),  # every value: the cut one too
    ('rec[key]', [(6, 19)]),  # a key not known
])
def test_an_entry_stored_under_another_literal_key_is_not_a_term(read, found):
    src = f"""
        for x, y in loader:
            out = model(x)
            rec = {{}}
            rec["loss"] = crit(out, y)
            rec["pred"] = out.detach()
            opt.zero_grad()
            {read}.backward()
            opt.step()
        """
    assert findings(src, "TL003") == found


@pytest.mark.parametrize("expr, cut", [
    # ACER's bias correction: the product carries `pi`'s graph through `torch.log(pi)`; both cuts are weights
    ("-c * pi.detach() * torch.log(pi) * (q.detach() - v)", []),
    ("-c * pi.detach() * (q.detach() - v)", ["pi.detach()", "q.detach()"]),  # nothing uncut: terms
    ("ce + 0.1 * reg.detach()", ["reg.detach()"]),
])
def test_a_cut_factor_beside_the_same_value_uncut_is_a_weight(expr, cut):
    """What the kinds cannot tell (every name of unknown kind): a factor that computes, uncut, with a value the
    product cuts elsewhere carries a graph, since the cut value had one."""
    import libcst as cst

    from torchlint.analysis.cuts import summand_detachments
    from torchlint.analysis.exprs import code_of

    assert [code_of(d.node) for d in summand_detachments(cst.parse_expression(expr))] == cut


@pytest.mark.parametrize("handler, found", [
    ("except RuntimeError:", []), ("except Exception:", []), ("except:", []), ("except ValueError:", [(6, 9)]),
])
def test_a_leaf_flag_whose_raise_is_caught_expects_a_graph(handler, found):
    """`try: penalty.requires_grad = True` / `except RuntimeError: pass`: the author expects the line to raise on a
    penalty that has a graph (it always does here), so the flag says nothing about the loss."""
    src = f"""
        for x in loader:
            out = critic(x)
            penalty = (out.norm(2) - 1) ** 2
            try:
                penalty.requires_grad = True
            {handler}
                pass
            opt.zero_grad()
            penalty.backward()
            opt.step()
        """
    assert findings(src, "TL003") == found


@pytest.mark.parametrize("weighted, found", [
    ("log_pi = torch.log(pi_taken + 1e-10)", []),  # an actor-critic's policy gradient: the advantage is its weight
    ("log_pi = dist.log_prob(actions)", []),
    ("log_pi = calc_log_probs(outs, actions)", []),  # a helper named for what it returns
    ("log_pi = pi_taken.sum(-1)", [(6, 18)]),  # not a log-probability: the cut advantage is a term
])
def test_a_cut_advantage_beside_a_log_probability_is_its_weight(weighted, found):
    """Whatever the kinds know of the policy's output (here nothing: it comes from an object's method), a cut value
    multiplying a log-probability is the score-function estimator's weight, not a term."""
    src = f"""
        for batch in loader:
            pi_taken, dist, outs = self.mac.forward(batch)
            {weighted}
            advantages = self.critic_advantages(batch)
            advantages = advantages.detach()
            loss = -(advantages * log_pi).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        """
    assert findings(src, "TL003") == found


EPISODE_STEP = """
import torch


def episode_step(model, optimiser, loss_fn, x, y, train):
    losses = 0
    for idx in range(x.shape[0]):
        optimiser.zero_grad()
        loss = loss_fn(model(x[idx]), y[idx])
        if train:
            losses += loss
        else:
            losses += loss.item()
    mean_loss = losses / x.shape[0]
    {backward}
    return mean_loss
"""


def test_a_term_cut_only_when_not_training_never_reaches_the_backward_run_only_when_training():
    """`train` is a parameter the function never rebinds: the `.item()` total and the backward are on opposite
    answers of the same test, so no call both cuts the term and back-propagates it."""
    src = EPISODE_STEP.format(backward="if train:\n        mean_loss.backward()\n        optimiser.step()")
    assert findings(src, "TL003") == []


@pytest.mark.parametrize("backward", [
    "mean_loss.backward()\n    optimiser.step()",  # the backward runs whatever `train` says
    # `train` is rebound in the function: the two tests may answer differently
    "train = not train\n    if train:\n        mean_loss.backward()\n        optimiser.step()",
])
def test_a_term_cut_on_a_path_the_backward_can_follow_is_still_reported(backward):
    assert findings(EPISODE_STEP.format(backward=backward), "TL003") == [(13, 23)]


def test_a_term_cut_under_a_flag_whose_attribute_the_function_rebinds_is_still_reported():
    """`cfg.train = False` inside the function may change the flag between the two tests: the cut term may reach."""
    src = EPISODE_STEP.format(backward="cfg.train = x.shape[0] > 1\n    if train:\n        mean_loss.backward()").replace(
        "if train:\n            losses += loss", "if cfg.train:\n            losses += loss").replace(
        "def episode_step(model, optimiser, loss_fn, x, y, train):", "def episode_step(model, optimiser, loss_fn, x, y, cfg):"
    ).replace("    if train:\n        mean_loss.backward()", "    if cfg.train:\n        mean_loss.backward()")
    assert "cfg.train = x.shape[0] > 1" in src and "if train" not in src
    assert findings(src, "TL003") == [(13, 23)]
