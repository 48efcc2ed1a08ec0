"""TL001 backward on an accumulated total: positives with exact positions, look-alikes that must stay silent."""

import textwrap

import pytest

from tests.helpers import findings, fixed, messages

SEED = """\
real_batchsize = 200

for epoch in range(1, 5):
    net.train()
    total_loss = Variable(torch.zeros(1).cuda(), requires_grad=True)
    iter_count = 0
    for batch_idx, (input, target) in enumerate(train_loader):
        input, target = Variable(input.cuda()), Variable(target.cuda())
        output = net(input)
        loss = F.nll_loss(output, target)
        total_loss = total_loss + loss
        if batch_idx % real_batchsize == 0:
            iter_count += 1
            ave_loss = total_loss/real_batchsize
            ave_loss.backward()
            optimizer.step()
            if iter_count % 10 == 0:
                print("Epoch:{}, iteration:{}, loss:{}".format(epoch, iter_count, ave_loss.data[0]))
            total_loss.data.zero_()
            optimizer.zero_grad()
"""

POSITIVE = {
    "method_returns_the_total_it_keeps_in_self": (
        """
        class Trainer:
            def __init__(self, model, opt):
                self.model, self.opt = model, opt
                self.loss_sum = 0

            def compute(self, x, y):
                loss = F.mse_loss(self.model(x), y)
                self.loss_sum += loss
                return self.loss_sum

            def fit(self, loader):
                for x, y in loader:
                    self.opt.zero_grad()
                    out = self.compute(x, y)
                    out.backward()
                    self.opt.step()
        """,
        [(16, 13)],
    ),
    "global_total_of_a_step_function": (
        """
        total_loss = 0

        def train_step(model, x, y, optimizer, criterion):
            global total_loss
            loss = criterion(model(x), y)
            total_loss += loss
            optimizer.zero_grad()
            total_loss.backward()
            optimizer.step()
        """,
        [(9, 5)],
    ),
    "nonlocal_total_of_a_nested_step_function": (
        """
        def fit(model, loader, optimizer, criterion):
            running = 0

            def step(x, y):
                nonlocal running
                running = running + criterion(model(x), y)
                optimizer.zero_grad()
                running.backward()
                optimizer.step()

            for x, y in loader:
                step(x, y)
        """,
        [(9, 9)],
    ),
    "total_in_self_of_a_per_step_method": (
        """
        class Learner:
            def __init__(self, net, opt):
                self.net, self.opt = net, opt
                self.running = 0

            def update(self, x, y):
                self.opt.zero_grad()
                self.running = self.running + F.mse_loss(self.net(x), y)
                self.running.backward()
                self.opt.step()
        """,
        [(10, 9)],
    ),
    "dict_entry_total": (
        """
        stats = {"loss": 0.0}
        for x, y in loader:
            opt.zero_grad()
            stats["loss"] += crit(model(x), y)
            stats["loss"].backward()
            opt.step()
        """,
        [(6, 5)],
    ),
    "seed_manual_batching": (SEED, [(15, 13)]),
    "augassign_every_iteration": (
        """
        total = 0
        for x, y in loader:
            total += criterion(model(x), y)
            total.backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
        [(5, 5)],
    ),
    "function_with_window": (
        """
        def train(model, loader, optimizer, k):
            running = 0.0
            for i, (x, y) in enumerate(loader):
                loss = F.cross_entropy(model(x), y)
                running = running + loss
                if (i + 1) % k == 0:
                    (running / k).backward()
                    optimizer.step()
                    optimizer.zero_grad()
        """,
        [(8, 13)],
    ),
    "trainer_method_attribute_total": (
        """
        class Trainer:
            def fit(self, loader):
                self.total = 0
                for batch in tqdm(loader):
                    loss = self.criterion(self.model(batch.x), batch.y)
                    self.total = loss + self.total
                    self.total.backward(retain_graph=True)
                    self.optimizer.step()
                    self.optimizer.zero_grad()
        """,
        [(8, 13)],
    ),
    "list_then_stack": (
        """
        losses = []
        for step, (x, y) in enumerate(zip(xs, ys)):
            losses.append(loss_fn(model(x), y))
            torch.stack(losses).mean().backward()
            opt.step()
            opt.zero_grad()
        """,
        [(5, 5)],
    ),
    "list_then_sum_in_window": (
        """
        losses = []
        for i, batch in enumerate(loader):
            loss = criterion(model(batch))
            losses.append(loss)
            if i % 4 == 3:
                total = sum(losses)
                total.backward()
                optimizer_G.step()
                optimizer_G.zero_grad()
        """,
        [(8, 9)],
    ),
    "while_loop_scaler": (
        """
        total_loss = torch.zeros(())
        step = 0
        while step < max_steps:
            with torch.autocast("cuda"):
                total_loss = total_loss + criterion(model(x), y)
            scaler.scale(total_loss).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
            step += 1
        """,
        [(7, 5)],
    ),
    "nested_epoch_reset_only_per_epoch": (
        """
        for epoch in range(10):
            epoch_loss = 0
            for x, y in loader:
                epoch_loss += criterion(model(x), y)
                epoch_loss.backward(retain_graph=True)
                opt.step()
                opt.zero_grad()
        """,
        [(6, 9)],
    ),
    "gan_generator_total": (
        """
        g_total = 0
        for real in loader:
            fake = netG(noise())
            d_loss = bce(netD(real), ones) + bce(netD(fake.detach()), zeros)
            d_loss.backward()
            optimizerD.step()
            optimizerD.zero_grad()
            g_total = g_total + bce(netD(fake), ones)
            g_total.backward()
            optimizerG.step()
            optimizerG.zero_grad()
        """,
        [(10, 5)],
    ),
    "moving_average_back_propagated": (
        """
        avg = 0.0
        for x, y in loader:
            loss = criterion(model(x), y)
            avg = 0.9 * avg + 0.1 * loss
            optimizer.zero_grad()
            avg.backward()
            optimizer.step()
        """,
        [(7, 5)],
    ),
    "moving_average_seeded_under_is_none": (
        """
        smoothed = None
        for x, y in loader:
            loss = criterion(model(x), y)
            if smoothed is None:
                smoothed = loss
            else:
                smoothed = smoothed * 0.5 + loss
            optimizer.zero_grad()
            smoothed.backward()
            optimizer.step()
        """,
        [(10, 5)],
    ),
    "per_step_method_back_propagates_the_stack_of_a_list_attribute": (
        """
        class Agent:
            def __init__(self, net):
                self.net = net
                self.optimizer = torch.optim.Adam(net.parameters())
                self.losses = []

            def learn(self, batch):
                self.losses.append(self.net(batch).mean())
                self.optimizer.zero_grad()
                torch.stack(self.losses).mean().backward()
                self.optimizer.step()
        """,
        [(11, 9)],
    ),
    "attribute_total_bound_once_per_epoch_before_the_loop_of_steps": (
        """
        class Trainer:
            def fit(self, loader, epochs):
                for epoch in range(epochs):
                    self.total = 0
                    for x, y in loader:
                        self.train_step(x, y)

            def train_step(self, x, y):
                self.total = self.total + self.model(x, y)
                self.optimizer.zero_grad()
                self.total.backward()
                self.optimizer.step()
        """,
        [(12, 9)],
    ),
    # REINFORCE's buffer of log-probabilities, filled by the policy's action choice and back-propagated by the
    # episode's update, never emptied (only the rewards are): the second update reaches the first one's freed graphs
    "policy_buffer_of_log_probs_never_emptied": (
        """
        import torch
        from torch import nn
        from torch.distributions import Categorical

        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(4, 2)
                self.saved_log_probs = []
                self.rewards = []

            def forward(self, x):
                return self.head(x).softmax(-1)

        policy = Policy()
        optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)

        def select_action(state):
            m = Categorical(policy(state))
            action = m.sample()
            policy.saved_log_probs.append(m.log_prob(action))
            return action.item()

        def finish_episode():
            returns = torch.tensor(policy.rewards)
            losses = [-lp * r for lp, r in zip(policy.saved_log_probs, returns)]
            optimizer.zero_grad()
            loss = torch.stack(losses).sum()
            loss.backward()
            optimizer.step()
            del policy.rewards[:]
        """,
        [(30, 5)],
    ),
    # the same buffer kept by an agent: `act()` fills it, `learn()` (a training step) reads it and resets only the
    # rewards
    "agent_buffer_filled_by_one_method_never_emptied": (
        """
        import torch
        from torch.distributions import Normal

        class Agent:
            def __init__(self, policy):
                self.policy = policy
                self.optimizer = torch.optim.Adam(policy.parameters())
                self.log_probs = []
                self.rewards = []

            def act(self, state):
                mean = self.policy(state)
                dist = Normal(mean, 0.1)
                action = dist.sample()
                self.log_probs.append(dist.log_prob(action).sum())
                return action

            def learn(self):
                returns = torch.tensor(self.rewards)
                loss = -(torch.stack(self.log_probs) * returns).sum()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                self.rewards = []
        """,
        [(23, 9)],
    ),
}

NEGATIVE = {
    "self_total_reset_after_the_step": """
        class Learner:
            def __init__(self, net, opt):
                self.net, self.opt = net, opt
                self.running = 0

            def update(self, x, y):
                self.opt.zero_grad()
                self.running = self.running + F.mse_loss(self.net(x), y)
                self.running.backward()
                self.opt.step()
                self.running = 0
        """,
    "self_total_reset_by_another_method": """
        class Learner:
            def __init__(self, net, opt):
                self.net, self.opt = net, opt
                self.running = 0

            def begin(self):
                self.running = 0

            def update(self, x, y):
                self.opt.zero_grad()
                self.running = self.running + F.mse_loss(self.net(x), y)
                self.running.backward()
                self.opt.step()
        """,
    "self_total_started_fresh_each_call": """
        class Learner:
            def __init__(self, net, opt):
                self.net, self.opt = net, opt
                self.running = 0

            def update(self, x, y, aux):
                self.opt.zero_grad()
                self.running = F.mse_loss(self.net(x), y)
                self.running += aux(x)
                self.running.backward()
                self.opt.step()
        """,
    "self_total_of_numbers_in_a_per_step_method": """
        class Learner:
            def __init__(self, net, opt):
                self.net, self.opt = net, opt
                self.seen = 0

            def update(self, x, y):
                self.opt.zero_grad()
                loss = F.mse_loss(self.net(x), y)
                self.seen += loss.item()
                loss.backward()
                self.opt.step()
        """,
    "fresh_total_per_iteration": """
        for x, y in loader:
            outputs = model(x)
            loss = 0
            for head in outputs:
                loss = loss + criterion(head, y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
    "reset_right_after_backward": """
        total = 0
        for i, (x, y) in enumerate(loader):
            total = total + criterion(model(x), y)
            if (i + 1) % 4 == 0:
                total.backward()
                optimizer.step()
                optimizer.zero_grad()
                total = 0
        """,
    "logging_total_with_item": """
        running_loss = 0.0
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            running_loss += loss.item()
        """,
    "correct_accumulation_divided": """
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
    "list_cleared_after_backward": """
        losses = []
        for i, batch in enumerate(loader):
            losses.append(criterion(model(batch)))
            if i % 4 == 3:
                torch.stack(losses).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
                losses = []
        """,
    "token_count_accumulated": """
        n_tokens = 0
        for x, y in loader:
            n_tokens += x.numel()
            loss = criterion(model(x), y) / n_tokens
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
    "validation_total_no_backward": """
        with torch.no_grad():
            val = 0
            for x, y in val_loader:
                val += criterion(model(x), y)
        """,
    "multi_task_sum_fresh": """
        for batch in loader:
            out = model(batch)
            total = out.a_loss + out.b_loss
            total += out.c_loss
            total.backward()
            opt.step()
            opt.zero_grad()
        """,
    "del_after_backward": """
        acc = 0
        for x, y in loader:
            acc = acc + criterion(model(x), y)
            acc.backward()
            del acc
            acc = 0
            opt.step()
            opt.zero_grad()
        """,
    "index_counter_advanced_by_sequence_length": """
        i = 0
        while i < len(corpus) - 1:
            seq_len = pick_length()
            x, y = slice_batch(corpus, i, seq_len)
            out, hidden = model(x, hidden)
            loss = criterion(out, y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            i += seq_len
        """,
    "moving_average_of_numbers_for_logging": """
        avg = None
        for x, y in loader:
            loss = criterion(model(x), y)
            if avg is None:
                avg = loss.item()
            else:
                avg = 0.9 * avg + 0.1 * loss.item()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
    "seeded_total_built_within_one_iteration": """
        for x, y in loader:
            total = None
            for head in model(x):
                part = criterion(head, y)
                if total is None:
                    total = part
                else:
                    total = 0.5 * total + part
            optimizer.zero_grad()
            total.backward()
            optimizer.step()
        """,
    "seed_rebinding_not_under_the_totals_own_test": """
        avg = None
        for x, y in loader:
            loss = criterion(model(x), y)
            if fresh:
                avg = loss
            else:
                avg = 0.9 * avg + 0.1 * loss
            optimizer.zero_grad()
            avg.backward()
            optimizer.step()
        """,
    "attribute_total_bound_before_each_step": """
        class Trainer:
            def fit(self, loader):
                for x, y in loader:
                    self.total = 0
                    self.train_step(x, y)

            def train_step(self, x, y):
                self.total = self.total + self.model(x, y)
                self.optimizer.zero_grad()
                self.total.backward()
                self.optimizer.step()
        """,
    "list_attribute_emptied_after_each_window": """
        class Window:
            def __init__(self, net, k):
                self.net = net
                self.k = k
                self.optimizer = torch.optim.Adam(net.parameters())
                self.losses = []

            def learn(self, batch):
                self.losses.append(self.net(batch).mean())
                if len(self.losses) == self.k:
                    self.optimizer.zero_grad()
                    torch.stack(self.losses).mean().backward()
                    self.optimizer.step()
                    self.losses = []
        """,
    "list_attribute_of_logged_numbers": """
        class Logged:
            def __init__(self, net):
                self.net = net
                self.optimizer = torch.optim.Adam(net.parameters())
                self.losses = []

            def learn(self, batch):
                loss = self.net(batch).mean()
                self.losses.append(loss.item())
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        """,
    "global_total_bound_again_before_each_step": """
        def train_step(model, x, y, optimizer, criterion):
            global total_loss
            total_loss += criterion(model(x), y)
            optimizer.zero_grad()
            total_loss.backward()
            optimizer.step()

        for x, y in loader:
            total_loss = 0
            train_step(model, x, y, optimizer, criterion)
        """,
    "global_total_of_logged_numbers": """
        total_loss = 0

        def train_step(model, x, y, optimizer, criterion):
            global total_loss
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
        """,
    # the same buffers emptied after the update (each way), kept as numbers, filled under no_grad, or read by a
    # function that only back-propagates (no step: not known to run once per update)
    "policy_buffers_emptied_or_without_graphs": """
        import torch
        from torch.distributions import Categorical

        class Agent:
            def __init__(self, policy):
                self.policy = policy
                self.optimizer = torch.optim.Adam(policy.parameters())
                self.log_probs, self.entropies, self.values, self.scores = [], [], [], []

            def act(self, state):
                dist = Categorical(self.policy(state))
                action = dist.sample()
                self.log_probs.append(dist.log_prob(action))
                self.entropies.append(dist.entropy())
                self.values.append(dist.log_prob(action).item())
                with torch.no_grad():
                    self.scores.append(dist.log_prob(action))
                return action

            def learn(self):
                loss = -torch.stack(self.log_probs).sum() - torch.stack(self.entropies).mean()
                loss = loss + torch.tensor(self.values).mean() + torch.stack(self.scores).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                del self.log_probs[:]
                self.entropies.clear()
        """,
}


@pytest.mark.parametrize("name", POSITIVE)
def test_positive(name):
    src, expected = POSITIVE[name]
    assert findings(src, "TL001") == expected


# A method keeping a total in `self` that the loop back-propagates what it returns (`_returned_totals`), in the
# shapes that carry no graph over: {body} is the method's, {loop} the loop's line before the call.
_RETURNED_TOTAL = """
        class Trainer:
            def __init__(self, model, opt):
                self.model, self.opt = model, opt
                self.loss_sum = 0

            def compute(self, x, y):
                {body}

            def fit(self, loader):
                for x, y in loader:
                    self.opt.zero_grad()
                    {loop}
                    out = self.compute(x, y)
                    out.backward()
                    self.opt.step()
        """
_ADDS_AND_RETURNS = "loss = F.mse_loss(self.model(x), y)\n                self.loss_sum += loss\n                return self.loss_sum"
NEGATIVE.update({
    "method_returns_its_total_reset_by_the_loop": _RETURNED_TOTAL.format(body=_ADDS_AND_RETURNS, loop="self.loss_sum = 0"),
    "method_returns_a_total_it_starts_each_call": _RETURNED_TOTAL.format(
        body="self.loss_sum = 0\n                self.loss_sum += F.mse_loss(self.model(x), y)\n                return self.loss_sum",
        loop="pass"),
    "method_keeps_a_total_and_returns_the_loss": _RETURNED_TOTAL.format(
        body="loss = F.mse_loss(self.model(x), y)\n                self.loss_sum += loss.item()\n                return loss",
        loop="pass"),
})


@pytest.mark.parametrize("name", NEGATIVE)
def test_negative(name):
    assert findings(NEGATIVE[name], "TL001") == []


def test_seed_fix_replaces_fake_reset_with_rebinding():
    out = fixed(SEED, "TL001")
    assert "total_loss.data.zero_()" not in out
    assert "            total_loss = Variable(torch.zeros(1).cuda(), requires_grad=True)\n            optimizer.zero_grad()" in out
    assert findings(out, "TL001") == []


def test_fix_rebinds_after_step_and_is_idempotent():
    src = POSITIVE["augassign_every_iteration"][0]
    once = fixed(src, "TL001")
    assert "    optimizer.zero_grad()\n    total = 0\n" in once
    assert fixed(once, "TL001") == once


def test_fix_is_unsafe_only():
    src = POSITIVE["augassign_every_iteration"][0]
    import textwrap

    assert fixed(src, "TL001", unsafe=False) == textwrap.dedent(src)


def test_message():
    """The full text of the finding, so a change of wording is seen here."""
    assert messages(POSITIVE["seed_manual_batching"][0], "TL001") == [(
        15, 13,
        "`ave_loss.backward()` back-propagates `total_loss`, a running total carried across iterations: "
        "each backward re-walks the graphs of earlier batches ('Trying to backward through the graph a "
        "second time'); rebind `total_loss` after the step",
    )]


# A total whose additions are of unknown origin (`head(x)` for a head of a module list) but that starts from a
# number: the back-propagated loss can carry a graph only through what is added (known by its use).
_HEADS = """
        def train(model, loader, opt):
            loss = 0
            for x, y in loader:
                {reset}
                for head in model.heads:
                    loss += F.mse_loss(head(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        """


def test_a_total_of_unknown_additions_back_propagated_is_known_by_its_use():
    assert findings(_HEADS.format(reset="pass"), "TL001") == [(9, 9)]


def test_a_total_of_unknown_additions_started_each_iteration_is_fine():
    assert findings(_HEADS.format(reset="loss = 0"), "TL001") == []


def test_a_total_beside_another_unknown_term_is_not_judged_by_use():
    """`loss + extra` where `extra` is not known to hold no graph: the graph may come from it, and the additions
    may be numbers (a total kept for the record)."""
    src = """
        def train(model, loader, opt, extra):
            total = 0
            for x, y in loader:
                total += stats(x)
                loss = extra(x) + total
                opt.zero_grad()
                loss.backward()
                opt.step()
        """
    assert findings(src, "TL001") == []


def test_a_list_of_unknown_values_whose_last_item_is_back_propagated_is_no_total():
    """`losses.append(f(...))` then `losses[-1].backward()`: one item, not the list's sum, is back-propagated."""
    src = """
        def fit(params, f, optimizer):
            losses = []
            while True:
                optimizer.zero_grad()
                losses.append(f(params))
                if len(losses) > 100:
                    break
                losses[-1].backward()
                optimizer.step()
        """
    assert findings(src, "TL001") == []


def test_the_last_item_of_a_list_of_losses_back_propagated_is_no_total():
    """`losses.append(crit(...))` then `losses[-1].backward()`: the loss appended this iteration, not a total."""
    src = """
        def fit(model, loader, opt, crit):
            losses = []
            for x, y in loader:
                opt.zero_grad()
                losses.append(crit(model(x), y))
                losses[-1].backward()
                opt.step()
        """
    assert findings(src, "TL001") == []


_COMPUTED_FROM = """
        def train(model, loader, opt, crit):
            {init}
            for x, y in loader:
                out = model(x)
                {keep}
                loss = crit(out, y) + {use}
                opt.zero_grad()
                loss.backward()
                opt.step()
        """


@pytest.mark.parametrize("init, keep, use", [
    # a moving average of features with their graph, in a penalty
    ("ema = None", "ema = out.mean(0) if ema is None else 0.9 * ema + 0.1 * out.mean(0)", "(out.mean(0) - ema).pow(2).sum()"),
    # a bank of earlier outputs with their graphs
    ("bank = []", "bank.append(out)", "torch.cat(bank[-8:]).pow(2).mean()"),
])
def test_a_loss_computed_from_a_total_kept_with_its_graph_is_reported_without_a_fix(init, keep, use):
    """Not a term of the loss, but what the loss is computed from: the second backward reaches the first batch's
    freed graph. The total is meant to be kept (a bank, an average), so no rebinding is offered."""
    src = _COMPUTED_FROM.format(init=init, keep=keep, use=use)
    assert findings(src, "TL001") == [(9, 9)]
    assert "keep `.detach()`ed values in" in messages(src, "TL001")[0][2]
    assert fixed(src, "TL001", unsafe=True) == textwrap.dedent(src)


@pytest.mark.parametrize("init, keep, use", [
    ("ema = None", "ema = out.mean(0).detach() if ema is None else 0.9 * ema + 0.1 * out.mean(0).detach()",
     "(out.mean(0) - ema).pow(2).sum()"),
    ("bank = []", "bank.append(out.detach())", "torch.cat(bank[-8:]).pow(2).mean()"),
    ("bank = []", "bank.append(out)", "0.0 * len(bank)"),  # only its length
    ("hits = 0", "hits += (out.argmax(1) == y).sum()", "0.0 * (hits > 10)"),  # a count, compared
])
def test_a_loss_reading_only_cut_values_counts_or_comparisons_of_a_total_is_not_reported(init, keep, use):
    assert findings(_COMPUTED_FROM.format(init=init, keep=keep, use=use), "TL001") == []


_TOTAL_RETURNING_CRITERION = """
    class SumLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.total = 0

        def forward(self, out, y):
            {reset}
            self.total += F.mse_loss(out, y)
            return {returned}

    crit = SumLoss()
    for x, y in loader:
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_loss_module_that_returns_the_total_it_keeps():
    """The criterion's forward adds each call's loss into `self.total` and returns it: every backward re-walks the
    earlier batches' graphs. Reset at each call, or returning the call's own loss, nothing carries over."""
    src = _TOTAL_RETURNING_CRITERION.format(reset="pass", returned="self.total")
    assert findings(src, "TL001") == [(16, 5)]
    assert findings(_TOTAL_RETURNING_CRITERION.format(reset="self.total = 0", returned="self.total"), "TL001") == []
    assert findings(_TOTAL_RETURNING_CRITERION.format(reset="pass", returned="F.mse_loss(out, y)"), "TL001") == []


FIRST_PASS = """
import torch


def train(model, loader, optimizer, criterion):
    for {head}:
        l = criterion(model(x), y)
        if {test}:
            loss = l
        else:
            loss = loss + l
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


@pytest.mark.parametrize("head, test", [
    ("i, (x, y) in enumerate(loader)", "i == 0"),
    ("i, (x, y) in enumerate(loader, start=0)", "0 == i"),
    ("i in range(100)", "not i"),
])
def test_a_total_seeded_on_the_first_pass_is_carried(head, test):
    """`if i == 0: loss = l` binds the total on the loop's first pass only: from the second on, every backward
    re-walks the earlier passes' graphs."""
    src = FIRST_PASS.format(head=head, test=test)
    if "range" in head:
        src = src.replace("        l = criterion(model(x), y)", "        x, y = next(loader)\n        l = criterion(model(x), y)")
    line = src.splitlines().index("        loss.backward()") + 1
    assert findings(src, "TL001") == [(line, 9)]


@pytest.mark.parametrize("head, test", [
    ("i, (x, y) in enumerate(loader)", "i % 8 == 0"),      # rebound every 8th pass: at most 8 passes' graphs
    ("i, (x, y) in enumerate(loader, 1)", "i == 0"),       # counted from 1: not the first pass's test
    ("i, (x, y) in enumerate(loader)", "i == 1"),
])
def test_other_tests_of_the_counter_are_not_seeds(head, test):
    """A binding under another test of the counter is a rebinding the analysis cannot place: not reported."""
    assert findings(FIRST_PASS.format(head=head, test=test), "TL001") == []


METER = """
import torch


class Meter:
    def __init__(self):
        self.sum = 0

    def add(self, v):
        self.sum = self.sum + v
        return self.sum


def train(model, loader, optimizer, criterion):
    meter = Meter()
    for x, y in loader:
        total = meter.add(criterion(model(x), y))
        optimizer.zero_grad()
        total.backward()
        optimizer.step()
"""


def test_the_running_sum_a_helper_object_returns_is_back_propagated():
    """`meter.add(loss)` adds each loss into `self.sum` and returns it; the loop back-propagates what it returns:
    from the second batch on, the backward re-walks the first batch's freed graph."""
    assert findings(METER, "TL001") == [(19, 9)]
    assert "what `meter.add()` returns, `self.sum`" in messages(METER, "TL001")[0][2]


@pytest.mark.parametrize("old, new", [
    ("    meter = Meter()\n    for x, y in loader:\n", "    for x, y in loader:\n        meter = Meter()\n"),  # fresh
    ("meter.add(criterion(model(x), y))", "meter.add(criterion(model(x), y).item())"),                       # a number
    ("        optimizer.step()\n", "        optimizer.step()\n        meter.reset()\n"),                        # reset
])
def test_a_helper_total_made_fresh_reset_or_fed_numbers_is_not_reported(old, new):
    src = METER.replace(old, new)
    if "reset()" in new:
        src = src.replace("        return self.sum\n", "        return self.sum\n\n    def reset(self):\n        self.sum = 0\n")
    assert old in METER and findings(src, "TL001") == []
