"""TL002 retain_graph never released."""

import textwrap

import pytest

from tests.helpers import findings, fixed, messages

POSITIVE = {
    "iterator_made_before_and_in_the_loop": (
        """
        def fit(net, loader, opt):
            batches = iter(loader)
            for step in range(100):
                try:
                    x = next(batches)
                except StopIteration:
                    batches = iter(loader)
                    x = next(batches)
                loss = net(x).mean()
                loss.backward(retain_graph=True)
                opt.step()
                opt.zero_grad()
        """,
        [(11, 9)],
    ),
    "same_forward_before_the_loop_under_no_grad": (
        """
        def probe(net, weights, xs):
            with torch.no_grad():
                anchor = net(xs, weights)
            for _ in range(50):
                noisy = net(xs, weights, noise=0.1)
                for k in range(len(xs)):
                    gap = F.mse_loss(noisy[k], anchor[k])
                    torch.autograd.grad(gap, weights, retain_graph=True)
        """,
        [(9, 13)],
    ),
    "another_function_before_the_loop": (
        """
        def probe(net, encode, weights, xs):
            anchor = encode(xs)
            for _ in range(50):
                noisy = net(xs, weights, noise=0.1)
                for k in range(len(xs)):
                    gap = F.mse_loss(noisy[k], anchor[k])
                    torch.autograd.grad(gap, weights, retain_graph=True)
        """,
        [(8, 13)],
    ),
    "plain_script": (
        """
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward(retain_graph=True)
            optimizer.step()
            optimizer.zero_grad()
        """,
        [(4, 5)],
    ),
    "seed_per_head_loop": (
        """
        for input, target_var in loader:
            output = model(input)
            for j in range(len(output)):
                loss = criterion(output[j], target_var)
                loss.backward(retain_graph=True)
            optimizer.step()
            optimizer.zero_grad()
        """,
        [(6, 9)],
    ),
    "function_positional_retain": (
        """
        def train(model, loader, opt):
            for x, y in loader:
                loss = F.mse_loss(model(x), y)
                loss.backward(None, True)
                opt.step()
                opt.zero_grad()
        """,
        [(5, 9)],
    ),
    "trainer_method_while": (
        """
        class Trainer:
            def run(self):
                while self.step < self.max_steps:
                    loss = self.compute_loss(next(self.it))
                    self.optimizer.zero_grad()
                    loss.backward(retain_graph=True)
                    self.optimizer.step()
        """,
        [(7, 13)],
    ),
    "gan_both_retained": (
        """
        for real in loader:
            d_loss = bce(netD(real), ones)
            d_loss.backward(retain_graph=True)
            optimizerD.step()
            g_loss = bce(netD(netG(z)), ones)
            g_loss.backward(retain_graph=True)
            optimizerG.step()
        """,
        [(7, 5)],
    ),
    "scaler_retained": (
        """
        for x, y in loader:
            with torch.autocast("cuda"):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward(retain_graph=True)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
        """,
        [(5, 5)],
    ),
    "autograd_grad_retained": (
        """
        for epoch in range(3):
            for x in loader:
                out = f(x)
                grads = torch.autograd.grad(out.sum(), params, retain_graph=True)
                apply(grads)
        """,
        [(5, 17)],
    ),
    "create_graph_last": (
        """
        for x, y in tqdm(loader):
            loss = criterion(model(x), y)
            loss.backward(create_graph=True)
            optimizer.step()
            optimizer.zero_grad()
        """,
        [(4, 5)],
    ),
    "accumulated_total_retained": (
        """
        total = 0
        for x, y in loader:
            total = total + criterion(model(x), y)
            total.backward(retain_graph=True)
            opt.step()
            opt.zero_grad()
        """,
        [(5, 5)],
    ),
    # -- what was built before the loop is no graph kept for later iterations ------------------------------
    "model_alias_built_before_the_loop": (
        """
        class Net(nn.Module):
            def fit(self, loader, optim):
                model = self.train()
                for xb, yb in loader:
                    loss = F.mse_loss(model(xb), yb)
                    loss.backward(retain_graph=True)
                    optim.step()
                    optim.zero_grad()
        """,
        [(7, 13)],
    ),
    "loss_function_alias_of_an_attribute": (
        """
        class Trainer:
            def __init__(self, loss):
                self.loss_func = self._get_loss_func(loss)

            def fit(self, loader, optim):
                loss_func = self.loss_func
                for xb, yb in loader:
                    total_loss = loss_func(self.net(xb), yb)
                    total_loss.backward(retain_graph=True)
                    optim.step()
                    optim.zero_grad()
        """,
        [(10, 13)],
    ),
    "container_store_killed_by_a_rebinding": (
        """
        class Net(nn.Module):
            def fit(self, x, loader, optim):
                for i in range(len(x)):
                    x[i] = np.expand_dims(x[i], 1)
                for xb, yb in loader:
                    x = xb.float()
                    loss = F.mse_loss(self(x), yb)
                    loss.backward(retain_graph=True)
                    optim.step()
                    optim.zero_grad()
        """,
        [(9, 13)],
    ),
    "target_reshaped_from_a_parameter": (
        """
        def train_batch(inp, target, model, optimizer, criterion, n):
            target_flat = target[:, 1:].contiguous().view(-1)
            for i in range(n):
                loss = criterion(model(inp).view(-1, 100), target_flat)
                model.zero_grad()
                loss.backward(retain_graph=True)
                optimizer.step()
        """,
        [(7, 9)],
    ),
    # -- a closure a factory method builds, bound to a name and handed to `step` ------------------------------
    "closure_from_a_factory_bound_to_a_name": (
        """
        class Inverter:
            def build(self, opt, guess):
                def evaluate():
                    opt.zero_grad()
                    gap = self.metric(self.victim(guess), self.target)
                    gap.backward(retain_graph=True)
                    return gap
                return evaluate

            def run(self, opt, guess, rounds):
                for _ in range(rounds):
                    evaluate = self.build(opt, guess)
                    opt.step(evaluate)
        """,
        [(7, 13)],
    ),
    "first_pass_guard_that_always_holds": (
        """
        def train(model, opt, loader, crit):
            for x, ys in loader:
                preds = model(x)
                losses = [crit(p, y) for p, y in zip(preds, ys)]
                opt.zero_grad()
                for i in range(3):
                    if i < 3:
                        losses[i].backward(retain_graph=True)
                    else:
                        losses[i].backward()
                opt.step()
        """,
        [(9, 17)],
    ),
    "first_pass_guard_of_a_loop_that_runs_once": (
        """
        def train(model, opt, loader, crit):
            for x, ys in loader:
                preds = model(x)
                losses = [crit(p, y) for p, y in zip(preds, ys)]
                opt.zero_grad()
                for i in range(1):
                    if i == 0:
                        losses[i].backward(retain_graph=True)
                    else:
                        losses[i].backward()
                opt.step()
        """,
        [(9, 17)],
    ),
    "grad_cam_helper_returning_its_graph": (
        """
        class CamAnalyzer:
            def heatmap(self, image, label=None):
                self.net.zero_grad()
                feats = self.net.features(image.unsqueeze(0))
                feats.retain_grad()
                out = self.net.classifier(feats.mean((2, 3)))
                if label is None:
                    label = out.argmax().item()
                out[0, label].backward(retain_graph=True)
                cam = (feats.grad.mean((2, 3), keepdim=True) * feats).sum(1).relu()
                return cam, label

            def run(self, loader):
                self.cams = []
                for images, _ in loader:
                    for image in images:
                        cam, label = self.heatmap(image.to(self.device))
                        self.show(cam, label)
        """,
        [(10, 9)],
    ),
}

NEGATIVE = {
    # chunks of one prediction handed in by the caller: each chunk's backward but the last needs the graph kept
    "chunks_of_a_prediction_handed_in": """
        def backward_in_chunks(criterion, hyp, gold, step=4):
            hyp = hyp.view(-1, hyp.size(2))
            gold = gold.contiguous().view(-1)
            total = 0.0
            for i in range(0, hyp.size(0), step):
                loss = criterion(hyp[i:i + step], gold[i:i + step]) / hyp.size(0)
                loss.backward(retain_graph=True)
                total += loss.item()
            return total
        """,
    "same_forward_once_before_the_loop": """
        def probe(net, weights, xs):
            anchor = net(xs, weights)
            for _ in range(50):
                noisy = net(xs, weights, noise=0.1)
                for k in range(len(xs)):
                    gap = F.mse_loss(noisy[k], anchor[k])
                    torch.autograd.grad(gap, weights, retain_graph=True)
        """,
    # pyg-team/pytorch_geometric's EquilibriumAggregation: gradient steps on `y` unrolled inside a forward; the graph
    # of every round is kept on purpose, for the backward of the model's loss after it
    "unrolled_solver_in_forward": """
        class EquilibriumAggregation(torch.nn.Module):
            def forward(self, x, y, func, iterations=5):
                momentum_buffer = torch.zeros_like(y)
                for _ in range(iterations):
                    val = func(x, y)
                    grad = torch.autograd.grad(val, y, create_graph=True, retain_graph=True)[0]
                    momentum_buffer = self.momentum * momentum_buffer - self.learning_rate * grad
                    y = y + momentum_buffer
                return y
        """,
    "gan_then_plain": """
        for real in loader:
            d_loss = bce(netD(real), ones)
            d_loss.backward(retain_graph=True)
            optimizerD.step()
            g_loss = bce(netD(fake), ones)
            g_loss.backward()
            optimizerG.step()
        """,
    "multi_task_then_plain": """
        for x, y in loader:
            shared = trunk(x)
            loss_a = crit_a(head_a(shared), y)
            loss_a.backward(retain_graph=True)
            loss_b = crit_b(head_b(shared), y)
            loss_b.backward()
            opt.step()
            opt.zero_grad()
        """,
    "per_head_then_final": """
        for x, y in loader:
            outs = model(x)
            for o in outs[:-1]:
                criterion(o, y).backward(retain_graph=True)
            criterion(outs[-1], y).backward()
            opt.step()
            opt.zero_grad()
        """,
    "plain_backward": """
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
    "retain_false": """
        for x, y in loader:
            criterion(model(x), y).backward(retain_graph=False)
            optimizer.step()
        """,
    "retain_variable": """
        for i, (x, y) in enumerate(loader):
            criterion(model(x), y).backward(retain_graph=keep)
            optimizer.step()
        """,
    "outside_loop": """
        loss = criterion(model(x), y)
        loss.backward(retain_graph=True)
        grads = [p.grad.clone() for p in model.parameters()]
        """,
    "gradient_penalty_then_backward": """
        for real in loader:
            gp_grad = torch.autograd.grad(d_out.sum(), interp, create_graph=True, retain_graph=True)[0]
            d_loss = d_fake - d_real + 10 * ((gp_grad.norm(2, dim=1) - 1) ** 2).mean()
            d_loss.backward()
            optimizerD.step()
            optimizerD.zero_grad()
        """,
    "lightning_manual_then_plain": """
        class GAN(LightningModule):
            def training_step(self, batch, idx):
                for _ in range(2):
                    opt_d, opt_g = self.optimizers()
                    self.manual_backward(d_loss, retain_graph=True)
                    opt_d.step()
                    self.manual_backward(g_loss)
                    opt_g.step()
        """,
    "per_layer_losses_on_one_student_forward": """
        def distill(student, teacher, x, opt):
            s_feats = student(x)
            with torch.no_grad():
                t_feats = teacher(x)
            for layer in range(len(s_feats)):
                loss = F.mse_loss(s_feats[layer], t_feats[layer])
                loss.backward(retain_graph=True)
            opt.step()
        """,
    "graph_before_the_loop_as_an_argument_of_an_aliased_loss": """
        def heads_loss(encoder, heads, x, y, opt, loss_fn):
            h = encoder(x)
            criterion = loss_fn
            for head in heads:
                loss = criterion(head(h), y)
                loss.backward(retain_graph=True)
            opt.step()
        """,
    "graph_stored_into_a_container_before_the_loop": """
        def per_key(net, x, y, keys, opt):
            outs = {}
            outs["main"] = net(x)
            for k in keys:
                loss = F.mse_loss(outs["main"][k], y[k])
                loss.backward(retain_graph=True)
            opt.step()
        """,
    "penalty_on_a_parameter_computed_before_the_loop": """
        def train(model, loader, optimizer):
            l1 = model.module.last_layer.weight.norm(p=1)
            for x, y in loader:
                loss = F.cross_entropy(model(x), y) + 1e-4 * l1
                optimizer.zero_grad()
                loss.backward(retain_graph=True)
                optimizer.step()
        """,
    "closure_from_a_factory_without_retain": """
        class Inverter:
            def build(self, opt, guess):
                def evaluate():
                    opt.zero_grad()
                    gap = self.metric(self.victim(guess), self.target)
                    gap.backward()
                    return gap
                return evaluate

            def run(self, opt, guess, rounds):
                for _ in range(rounds):
                    evaluate = self.build(opt, guess)
                    opt.step(evaluate)
        """,
    "closure_name_bound_to_two_factories": """
        class Inverter:
            def build(self, opt, guess):
                def evaluate():
                    gap = self.metric(self.victim(guess), self.target)
                    gap.backward(retain_graph=True)
                    return gap
                return evaluate

            def run(self, opt, guess, rounds, other):
                for _ in range(rounds):
                    evaluate = self.build(opt, guess) if other is None else other.build(opt)
                    opt.step(evaluate)
        """,
    "first_pass_retains_and_the_second_frees": """
        def train(model, opt, loader, crit, grads):
            for x, ys in loader:
                preds = model(x)
                losses = [crit(p, y) for p, y in zip(preds, ys)]
                opt.zero_grad()
                for i in range(2):
                    if i == 0:
                        losses[i].backward(retain_graph=True)
                    else:
                        losses[i].backward()
                    grads.append([p.grad.clone() for p in model.parameters()])
                    model.zero_grad()
                opt.step()
        """,
    "grad_cam_helper_per_image_returns_arrays": """
        class CamAnalyzer:
            def heatmap(self, image, label=None):
                self.net.zero_grad()
                feats = self.net.features(image.unsqueeze(0))
                feats.retain_grad()
                out = self.net.classifier(feats.mean((2, 3)))
                if label is None:
                    label = out.argmax().item()
                out[0, label].backward(retain_graph=True)
                cam = (feats.grad.mean((2, 3), keepdim=True) * feats).sum(1).relu()
                return cam.detach().cpu().numpy(), label

            def run(self, loader):
                for images, _ in loader:
                    for image in images:
                        cam, label = self.heatmap(image.to(self.device))
                        self.show(cam, label)
        """,
}


@pytest.mark.parametrize("name", POSITIVE)
def test_positive(name):
    src, expected = POSITIVE[name]
    assert findings(src, "TL002") == expected


@pytest.mark.parametrize("name", NEGATIVE)
def test_negative(name):
    assert findings(NEGATIVE[name], "TL002") == []


def test_fix_drops_retain_graph_safely():
    out = fixed(POSITIVE["plain_script"][0], "TL002", unsafe=False)
    assert "    loss.backward()\n" in out
    assert findings(out, "TL002") == []


def test_fix_keeps_other_arguments():
    src = """
    for x in loader:
        loss = f(x)
        loss.backward(gradient=g,  retain_graph=True)
    """
    assert "loss.backward(gradient=g)" in fixed(src, "TL002", unsafe=False)


def test_fix_on_carried_total_is_unsafe():
    src = POSITIVE["accumulated_total_retained"][0]
    assert "retain_graph=True" in fixed(src, "TL002", unsafe=False)
    assert "retain_graph=True" not in fixed(src, "TL002", unsafe=True)


def test_create_graph_has_no_fix():
    src = POSITIVE["create_graph_last"][0]
    assert "create_graph=True" in fixed(src, "TL002", unsafe=True)


def test_no_fix_when_call_runs_several_times_per_iteration():
    src = POSITIVE["seed_per_head_loop"][0]
    assert "retain_graph=True" in fixed(src, "TL002", unsafe=True)


def test_fix_offered_in_nested_epoch_batch_loops():
    src = """
    for epoch in range(3):
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward(retain_graph=True)
            optimizer.step()
    """
    assert "    loss.backward()\n" in fixed(src, "TL002", unsafe=False)


@pytest.mark.parametrize(
    "src",
    [
        # The same graph back-propagated repeatedly: retain_graph=True is required.
        """
        loss = model(x).sum()
        for _ in range(1000):
            dist_autograd.backward(context_id, [loss], retain_graph=True)
        """,
        """
        def warmup_backward(f, *args):
            for _ in range(3):
                f.backward(retain_graph=True)
        """,
        """
        outs = fn(*inps)
        for out in outs:
            out.sum().backward(retain_graph=True)
        """,
        """
        results = model(x)
        for grads in choices:
            torch.autograd.grad(results, leaves, grads, retain_graph=True)
        """,
    ],
)
def test_repeated_backward_of_one_graph_is_not_flagged(src):
    assert findings(src, "TL002") == []


def test_inline_forward_in_backward_is_flagged():
    src = """
    for x, y in loader:
        criterion(model(x), y).backward(retain_graph=True)
        opt.step()
    """
    assert findings(src, "TL002") == [(3, 5)]


# A helper called once per batch back-propagates one loss per layer of a single forward, with retain_graph=True on
# each. The next run of its inner loop goes through the same graph: without retain_graph PyTorch raises "Trying to
# backward through the graph a second time", so neither a finding nor a fix is right here.
PER_LAYER_HELPER = """
def train_step(model, opt, x, y):
    outs = model(x)
    for j in range(len(outs)):
        loss = F.mse_loss(outs[j], y)
        loss.backward(retain_graph=True)
    opt.step()
    opt.zero_grad()

for x, y in loader:
    train_step(model, opt, x, y)
"""


def test_per_layer_helper_called_per_batch_is_not_flagged():
    # The graph is built once per call before the helper's own loop and freed when it returns: the retain is needed.
    assert findings(PER_LAYER_HELPER, "TL002") == []
    assert "retain_graph=True" in fixed(PER_LAYER_HELPER, "TL002", unsafe=True)


HEAD_HELPER_IN_INNER_LOOP = """
def head_step(head, feats, y):
    loss = F.mse_loss(head(feats), y)
    loss.backward(retain_graph=True)

for x, y in loader:
    feats = trunk(x)
    for head in heads:
        head_step(head, feats, y)
    opt.step()
    opt.zero_grad()
"""


def test_helper_handed_a_shared_graph_in_an_inner_loop_has_no_fix():
    # `feats` is built once per batch and kept into the next forward (the finding stands), but every run of the
    # inner loop goes through it: no fix, safe or unsafe.
    assert findings(HEAD_HELPER_IN_INNER_LOOP, "TL002") == [(4, 5)]
    assert "retain_graph=True" in fixed(HEAD_HELPER_IN_INNER_LOOP, "TL002", unsafe=True)


def test_helper_built_from_own_parameter_in_its_inner_loop_has_no_fix():
    src = """
    def heads_step(heads, feats, y):
        for head in heads:
            loss = F.mse_loss(head(feats), y)
            loss.backward(retain_graph=True)

    for x, y in loader:
        feats = trunk(x)
        heads_step(heads, feats, y)
        opt.step()
    """
    assert findings(src, "TL002") == [(5, 9)]
    assert "retain_graph=True" in fixed(src, "TL002", unsafe=True)


def test_helper_with_fresh_micro_batch_forwards_keeps_its_safe_fix():
    src = """
    def micro_step(model, mb_x, mb_y):
        loss = F.mse_loss(model(mb_x), mb_y)
        loss.backward(retain_graph=True)

    for x, y in loader:
        for mb_x, mb_y in zip(x.chunk(2), y.chunk(2)):
            micro_step(model, mb_x, mb_y)
        opt.step()
    """
    assert findings(src, "TL002") == [(4, 5)]
    assert "    loss.backward()\n" in fixed(src, "TL002", unsafe=False)


def test_message():
    """The full text of the finding, so a change of wording is seen here."""
    assert messages(POSITIVE["plain_script"][0], "TL002") == [(
        4, 5,
        "`loss.backward(retain_graph=True)` is the last backward of the iteration and keeps the graph "
        "(retain_graph=True): the saved activations stay alive into the next iteration's forward (twice "
        "the activation memory at its peak, more while anything holds the loss): drop it from the last "
        "backward",
    )]


# An agent's `learn()` whose loop repeats `args.updates` times, an option left at its default of 1: there is no next
# iteration for the kept graph to meet, and it dies when `learn()` returns.
ONCE_PER_CALL = """
    import argparse
    cli = argparse.ArgumentParser()
    cli.add_argument("--updates", default={updates}, type=int)
    cli.add_argument("--lr", default=1e-3, type=float)
    opts = cli.parse_args()
    {extra}

    class Agent:
        def learn(self, batch):
            obs, act = batch
            for _ in range(opts.updates):
                actor_loss = -self.critic(obs, self.actor(obs)).mean()
                self.actor_opt.zero_grad()
                actor_loss.backward(retain_graph=True)
                self.actor_opt.step()
            {tail}
"""


def _once(updates=1, extra="", tail="pass"):
    return ONCE_PER_CALL.format(updates=updates, extra=extra, tail=tail)


def test_loop_run_once_per_call_by_its_option_default_is_not_flagged():
    assert findings(_once(), "TL002") == []


@pytest.mark.parametrize("src", [
    _once(updates=4),  # several updates per call: the next one's forward meets the kept graph
    _once(extra="opts.updates = 8"),  # the script changes the option: its default says nothing
    _once(tail="return actor_loss"),  # the caller keeps the loss, and with it the graph, into the next call
    _once(tail="self.last = actor_loss"),  # kept on the object across calls
    _once(extra="opts = cli.parse_args()"),  # bound twice: not known which options it holds
])
def test_loop_not_known_to_run_once_or_whose_graph_leaves_the_call_is_flagged(src):
    assert findings(src, "TL002") == [(15, 13)]


def test_single_pass_loop_of_the_module_body_is_still_flagged():
    src = """
        import argparse
        cli = argparse.ArgumentParser()
        cli.add_argument("--updates", default=1, type=int)
        opts = cli.parse_args()
        for _ in range(opts.updates):
            loss = model(x).sum()
            loss.backward(retain_graph=True)
            opt.step()
        """
    assert findings(src, "TL002") == [(8, 5)]


# A learner's `update()` called once per environment step: its one backward runs once per call, over a loss it
# builds from a sampled batch, and only a number leaves the call: the kept graph is freed when it returns.
PER_CALL_HELPER = """
    class Learner:
        def update(self, n):
            obs, act = self.buffer.sample(n)
            obs = torch.as_tensor(obs)
            q_loss = F.mse_loss(self.q(obs), act)
            self.q_opt.zero_grad()
            q_loss.backward(retain_graph=True)
            self.q_opt.step()
            self.target_q = self.soft_copy(self.q, self.target_q)
            {tail}

    learner = Learner()
    for step in range(1000):
        {call}
"""


def _per_call(tail="return q_loss.item()", call="learner.update(32)"):
    return PER_CALL_HELPER.format(tail=tail, call=call)


def test_helper_whose_graph_dies_when_it_returns_is_not_flagged():
    assert findings(_per_call(), "TL002") == []
    assert findings(_per_call(tail="return q_loss.detach().cpu().numpy()"), "TL002") == []


@pytest.mark.parametrize("src", [
    _per_call(tail="return q_loss"),  # the caller holds the loss, and with it the graph, into the next step
    _per_call(tail="self.history.append(q_loss)"),  # kept on the object across calls
    _per_call(tail="self.last = q_loss"),
])
def test_helper_whose_graph_leaves_the_call_is_flagged(src):
    assert findings(src, "TL002") == [(8, 9)]


def test_helper_fed_a_graph_by_its_caller_is_flagged():
    src = """
    class Head:
        def update(self, feats, y):
            loss = F.mse_loss(self.net(feats), y)
            loss.backward(retain_graph=True)
            self.opt.step()

    head = Head()
    for x, y in loader:
        feats = trunk(x)
        head.update(feats, y)
    """
    assert findings(src, "TL002") == [(5, 9)]


def test_helper_backward_in_a_loop_of_its_own_is_flagged():
    src = """
    def update(agent, n):
        for _ in range(n):
            loss = agent.q(agent.buffer.sample()).mean()
            loss.backward(retain_graph=True)
            agent.opt.step()

    for step in range(1000):
        update(agent, 4)
    """
    assert findings(src, "TL002") == [(5, 9)]


# An input gradient taken with backward(create_graph=True) and read from the leaf's .grad (a gradient penalty).
INPUT_GRADIENT = """\
import torch


def penalty(critic, real, fake):
    t = torch.rand(real.size(0), 1)
    mixed = t * real + (1 - t) * fake
    {leaf}
    score = critic(mixed)
    {backward}
    slope = mixed.grad.view(mixed.size(0), -1)
    {after}
    return ((slope.norm(dim=1) - 1) ** 2).mean()
"""


def _input_gradient(leaf="mixed.requires_grad = True",
                    backward="score.backward(torch.ones_like(score), create_graph=True)", after="pass"):
    return INPUT_GRADIENT.format(leaf=leaf, backward=backward, after=after)


@pytest.mark.parametrize("src", [
    _input_gradient(),
    _input_gradient(leaf="mixed.requires_grad_()"),
    _input_gradient(leaf="mixed = Variable(mixed.data, requires_grad=True)"),
    _input_gradient(backward="torch.autograd.backward(score, torch.ones_like(score), create_graph=True)"),
])
def test_input_gradient_through_backward_with_create_graph_is_flagged(src):
    assert findings(src, "TL002") == [(9, 5)]


@pytest.mark.parametrize("src", [
    _input_gradient(backward="mixed.grad = torch.autograd.grad(score, mixed, torch.ones_like(score), "
                             "create_graph=True)[0]"),            # the recommended form: nothing stored in a cycle
    _input_gradient(backward="score.backward(torch.ones_like(score))"),                # no graph kept in .grad
    _input_gradient(after="mixed.grad = None"),                                        # the cycle is broken
    _input_gradient(leaf="pass"),                                                      # not a leaf it makes
    _input_gradient(backward="score.backward(torch.ones_like(score), create_graph=second_order)"),  # not known
])
def test_input_gradient_look_alikes_are_not_flagged(src):
    assert findings(src, "TL002") == []


_HANDED = """
        def backprop(loss):
            loss.backward(retain_graph=True)

        for x, y in loader:
            {forward}
            optimizer.zero_grad()
            backprop({handed})
            optimizer.step()
        """


def test_a_helper_handed_the_iterations_loss_keeps_its_graph():
    src = _HANDED.format(forward="loss = criterion(model(x), y)", handed="loss")
    assert findings(src, "TL002") == [(3, 5)]
    assert fixed(src, "TL002") == textwrap.dedent(src)  # no fix: the helper's other callers may need the graph


def test_a_helper_handed_a_graph_built_once_before_the_loop_needs_it_kept():
    src = _HANDED.format(forward="pass", handed="shared_loss")
    assert findings(src, "TL002") == []


def test_a_guidance_loop_handing_its_loss_to_a_helper_trains_nothing():
    """No optimizer steps: the loop refines latents from a graph that may have been built before it (attention
    maps a denoiser stored), which each `autograd.grad` goes through again."""
    src = """
        def update(latents, loss, step):
            grad = torch.autograd.grad(loss, [latents], retain_graph=True)[0]
            return latents - step * grad

        while loss > target:
            latents = latents.clone().detach().requires_grad_(True)
            loss = attention_loss(store)
            latents = update(latents, loss, 0.1)
        """
    assert findings(src, "TL002") == []


_TWO_LOSSES = """
        class Learner:
            def update(self, batches):
                for state, ret, adv in batches:
                    {forward}
                    self.critic_optim.zero_grad()
                    critic_loss.backward(retain_graph=True)
                    self.critic_optim.step()
                    self.actor_optim.zero_grad()
                    actor_loss.backward()
                    self.actor_optim.step()
        """


def test_a_graph_kept_for_a_later_backward_of_another_graph_is_reported():
    """The actor's and the critic's losses come from their own forwards of the batch: the actor's backward never
    goes through the critic's graph, which is kept for nothing."""
    forward = _lines("value = self.critic(state); critic_loss = (ret - value).pow(2).mean() * self.hp.w; "
                     "actor_loss = -(self.actor(state) * adv).mean()")
    assert findings(_TWO_LOSSES.format(forward=forward), "TL002") == [(9, 13)]


def _lines(statements: str) -> str:
    """`a; b` as lines of the loop's body (statements on one line count as one source)."""
    return "\n                    ".join(part.strip() for part in statements.split(";"))


@pytest.mark.parametrize("forward", [
    # a shared trunk: the actor's loss goes through the kept graph
    "h = self.trunk(state); critic_loss = (ret - self.critic(h)).pow(2).mean(); actor_loss = -(self.actor(h) * adv).mean()",
    # both from one call
    "critic_loss, actor_loss = self.losses(state, ret, adv)",
    # the actor's loss reads the critic's value with its graph
    "value = self.critic(state); critic_loss = (ret - value).pow(2).mean(); actor_loss = -(value * adv).mean()",
    # a tensor kept on the object, read whole by both
    "critic_loss = (ret - self.feats).pow(2).mean(); actor_loss = -(self.feats * adv).mean()",
])
def test_a_graph_a_later_backward_may_go_through_is_kept_on_purpose(forward):
    assert findings(_TWO_LOSSES.format(forward=_lines(forward)), "TL002") == []


_PROJECTIONS = """
    class JacobianPenalty(nn.Module):
        def forward(self, x, y):
            total = 0
            for _ in range(self.n):
                v = torch.randn_like(y)
                jv = self._jvp(y, x, v)
                total = total + jv.pow(2).sum()
            return total

        def _jvp(self, y, x, v):
            {body}
            (g,) = torch.autograd.grad(flat_y, x, v.reshape(-1), retain_graph=True, create_graph=self.create)
            return g
"""


def test_a_helper_differentiating_a_view_of_what_it_is_handed_keeps_the_callers_graph():
    """A penalty's loop takes one Jacobian-vector product per pass of the same output `y`, built before the loop
    by the caller: every pass but the last needs its graph. A helper that runs a forward of its own (`self.head`)
    builds a graph each pass, and keeps it on the last pass: that one is reported, as is a helper that
    differentiates only what the pass builds (from `v`)."""
    assert findings(_PROJECTIONS.format(body="flat_y = y.reshape(-1)"), "TL002") == []
    assert findings(_PROJECTIONS.format(body="flat_y = self.head(y).reshape(-1)"), "TL002") == [(13, 16)]
    assert findings(_PROJECTIONS.format(body="flat_y = self.head(v).reshape(-1)"), "TL002") == [(13, 16)]


_DIFFERENTIATED_AGAIN = """
    for it in range(iterations):
        old_loss, old_kl = surrogate(replays, policy)
        grad = torch.autograd.grad(old_loss, policy.parameters(), retain_graph=True)
        grad = flatten([g.detach() for g in grad])
        {after}
        direction = solve(fvp, grad)
        apply(policy, direction)
"""


@pytest.mark.parametrize("after", [
    "fvp = trpo.hessian_vector_product(old_kl, policy.parameters())",  # named for a derivative, a sibling value
    "fvp = fisher(old_loss, policy.parameters(), create_graph=True)",  # given create_graph=, the value itself
])
def test_a_graph_differentiated_again_by_a_call_is_kept_on_purpose(after):
    """A Hessian-vector product, or a learned update given `create_graph=`, differentiates the graph again after
    the retained gradient: retain_graph=True is what lets it."""
    assert findings(_DIFFERENTIATED_AGAIN.format(after=after), "TL002") == []


@pytest.mark.parametrize("after", [
    "fvp = log_kl(old_kl, policy.parameters())",  # a call that takes no derivative
    "fvp = trpo.hessian_vector_product(kl_of(policy), policy.parameters())",  # of a graph of its own
    "fvp = torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)",  # reads `.grad`
])
def test_a_later_call_that_does_not_differentiate_the_graph_keeps_nothing_alive(after):
    assert findings(_DIFFERENTIATED_AGAIN.format(after=after), "TL002") == [(4, 12)]


_LEARNED_UPDATE = """
    def adapt(clf, update, x, y):
        for step in range(steps):
            err = loss(clf(x), y)
            if step > 0:
                grads = torch.autograd.grad(err, update.parameters(), retain_graph=True)
                meta_sgd(update, grads)
            {after}
        return loss(clf(x), y)

    for x, y in loader:
        adapt(clf, update, x, y).backward()
        opt.step()
        opt.zero_grad()
"""


def test_a_helper_whose_graph_a_learned_update_differentiates_again():
    """In the helper the loop calls, a learned update is handed the same error with `create_graph=True` after the
    retained gradient: it goes through that graph again. Without it the retain keeps the graph for nothing."""
    again = "meta_sgd(clf, update(err, clf.parameters(), create_graph=True))"
    assert findings(_LEARNED_UPDATE.format(after=again), "TL002") == []
    assert findings(_LEARNED_UPDATE.format(after="meta_sgd(clf, [])"), "TL002") == [(6, 21)]


def test_a_later_backward_on_some_paths_is_no_call_that_differentiates_again():
    """`autograd.grad` later in the iteration is a backward the rule itself weighs: on the path that skips it, the
    first one is the last backward and keeps the graph."""
    src = """
    for x in loader:
        err = crit(net(x))
        g1 = torch.autograd.grad(err, net.parameters(), retain_graph=True)
        if use_extra:
            g2 = torch.autograd.grad(err * 2, net.parameters())
        apply_grads(net, g1)
        opt.step()
    """
    assert findings(src, "TL002") == [(4, 10)]


INNER_ADAPTATION = """
import torch


class Learner(torch.nn.Module):
    def adapt(self, x, y, steps=5, lr=0.01):
        fast = list(self.parameters())
        for _ in range(steps):
            loss = torch.nn.functional.cross_entropy(self(x), y)
            grads = torch.autograd.grad(loss, fast, create_graph=True)
            {update}
        return self(x)

    def train_loop(self, tasks, optimizer, n_task=4):
        losses = []
        for i, ((xs, ys), (xq, yq)) in enumerate(tasks):
            losses.append(torch.nn.functional.cross_entropy(self.adapt(xs, ys), yq))
            if len(losses) == n_task:  # several tasks per meta-update
                torch.stack(losses).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
                losses = []
"""


def test_second_order_gradients_kept_on_the_parameters_as_fast_weights_are_meant():
    """MAML's fast weights stored on each parameter (`weight.fast`), which the layers' `forward` reads: the query
    loss's backward goes through them, which is what `create_graph=True` is for."""
    update = "for k, w in enumerate(self.parameters()):\n                w.fast = w - lr * grads[k]"
    assert findings(INNER_ADAPTATION.format(update=update), "TL002") == []


def test_second_order_gradients_of_fast_weights_that_are_thrown_away_are_still_reported():
    update = "fast = [w - lr * g for w, g in zip(fast, grads)]\n            fast = None"
    assert findings(INNER_ADAPTATION.format(update=update), "TL002") == [(10, 21)]


PER_DOMAIN_GRADIENTS = """
import torch


def gradient_variance(losses, params, domains, n_domains, model, x):
    grads = []
    for d in range(n_domains):
        mask = domains == d
        {loss}
        g = torch.autograd.grad(loss_d, params, retain_graph=True)
        grads.append(torch.cat([t.flatten() for t in g]).detach())
    return torch.stack(grads).var(dim=0).mean().item()
"""


def test_gradients_of_a_loss_handed_in_taken_per_domain_keep_the_callers_graph_on_purpose():
    """The caller built the per-sample losses once, before the call: every pass differentiates that graph again, and
    the caller may back-propagate it afterwards."""
    assert findings(PER_DOMAIN_GRADIENTS.format(loss="loss_d = losses[mask].mean()"), "TL002") == []


def test_gradients_of_a_loss_each_pass_computes_with_a_forward_are_still_reported():
    src = PER_DOMAIN_GRADIENTS.format(loss="loss_d = model(x[mask]).pow(2).mean()")
    assert findings(src, "TL002") == [(10, 13)]
