"""TL008 recurrent hidden state carried across batches without detach."""

import textwrap

import pytest

from tests.helpers import findings, fixed, messages

POSITIVE = {
    # the same helper, but the loss reads the carried average with its graph
    "moving_average_read_with_its_graph_by_the_loss_function": (
        """
        def mine_loss(net, joint, marginal, last_ma, rate=0.01):
            t = net(joint)
            et = torch.exp(net(marginal))
            ma = torch.mean(et) if last_ma is None else (1 - rate) * last_ma + rate * torch.mean(et)
            loss = -(torch.mean(t) - torch.mean(et) / torch.mean(ma))
            return loss, ma

        ma = None
        for joint, marginal in batches:
            loss, ma = mine_loss(net, joint, marginal, ma)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
        [(11, 16)],
    ),
    # -- the state kept on the module, read and rebound in forward ----------------------------------------------
    "module_state_lstm": (
        """
        class RNNModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(4, 8, batch_first=True)
                self.fc = nn.Linear(8, 1)
                self.hidden = None

            def forward(self, x):
                out, self.hidden = self.rnn(x, self.hidden)
                return self.fc(out[:, -1])

        for x, y in loader:
            optimizer.zero_grad()
            F.mse_loss(model(x), y).backward()
            optimizer.step()
        """,
        [(10, 28)],
    ),
    "module_state_gru_single_tensor": (
        """
        class Net(torch.nn.Module):
            def __init__(self, n):
                super().__init__()
                self.gru = torch.nn.GRU(n, n)
                self.h = torch.zeros(1, 1, n)

            def forward(self, x):
                y, self.h = self.gru(x, self.h)
                return y.sum()

        def train(model, data, opt):
            for x in data:
                opt.zero_grad()
                model(x).backward()
                opt.step()
        """,
        [(9, 21)],
    ),
    "module_state_through_cell": (
        """
        class Cell(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.LSTMCell(3, 3)
                self.state = None

            def forward(self, x):
                self.state = self.cell(x, self.state)
                return self.state[0]

        for x, y in loader:
            loss = crit(model(x), y)
            loss.backward()
            optim.step()
            optim.zero_grad()
        """,
        [(9, 22)],
    ),
    "script_init_hidden": (
        """
        hidden = model.init_hidden(batch_size)
        for x, y in batches:
            output, hidden = model(x, hidden)
            loss = criterion(output, y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
        [(4, 22)],
    ),
    "function_zeros": (
        """
        def train(rnn, data, opt):
            h = torch.zeros(1, 4, 8)
            for i in range(0, len(data) - 1, bptt):
                out, h = rnn(data[i], h)
                F.mse_loss(out, data[i + 1]).backward()
                opt.step()
                opt.zero_grad()
        """,
        [(5, 18)],
    ),
    "tuple_state_lstm": (
        """
        state = (torch.zeros(1, 2, 3), torch.zeros(1, 2, 3))
        for x, y in loader:
            out, state = lstm(x, state)
            loss_fn(out, y).backward()
            opt.step()
        """,
        [(4, 18)],
    ),
    "trainer_self_hidden": (
        """
        class Trainer:
            def fit(self, loader):
                for x, y in loader:
                    logits, self.hidden = self.model(x, self.hidden)
                    loss = self.criterion(logits, y)
                    loss.backward()
                    self.optimizer.step()
        """,
        [(5, 35)],
    ),
    "none_initial": (
        """
        hx = None
        for x, y in loader:
            y_hat, hx = gru(x, hx)
            criterion(y_hat, y).backward()
            optimizer.step()
        """,
        [(4, 17)],
    ),
    "while_loop": (
        """
        hidden = init()
        i = 0
        while i < n:
            pred, hidden = net(seq[i], hidden)
            loss = mse(pred, target[i])
            loss.backward()
            opt.step()
            i += 1
        """,
        [(5, 20)],
    ),
    "nested_epochs_keyword": (
        """
        for epoch in range(5):
            hidden = model.init_hidden(bs)
            for batch in loader:
                out, hidden = model(batch.x, hidden=hidden)
                loss = crit(out, batch.y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(5, 23)],
    ),
    "accumulation_variant": (
        """
        h = model.init_hidden(1)
        for i, (x, y) in enumerate(stream):
            out, h = model(x, h)
            (criterion(out, y) / k).backward()
            if (i + 1) % k == 0:
                optimizer.step()
                optimizer.zero_grad()
        """,
        [(4, 14)],
    ),
    # -- a state class whose `detach()` does nothing, overriding a base's that detaches ------------------------
    "noop_detach_override_same_file": (
        """
        class CarryBase:
            def detach(self):
                self.carry = tuple(c.detach() for c in self.carry)

        class AttnCarry(CarryBase):
            def __init__(self, memory):
                self.memory = memory
                self.prev = None

            def detach(self):
                pass
        """,
        [(11, 5)],
    ),
    "noop_detach_override_base_detaches_in_place": (
        """
        class CarryBase:
            def detach(self):
                for c in self.parts:
                    c.detach_()

        class ConvCarry(CarryBase):
            def __init__(self, cache):
                self.cache = cache

            def detach(self):
                \"\"\"Nothing to cut.\"\"\"
                pass
        """,
        [(11, 5)],
    ),
}

NEGATIVE = {
    # MINE's moving average: fed back with its graph, but the loss reads it only detached
    "moving_average_read_only_detached_by_the_loss_function": """
        def mine_loss(net, joint, marginal, last_ma, rate=0.01):
            t = net(joint)
            et = torch.exp(net(marginal))
            ma = torch.mean(et) if last_ma is None else (1 - rate) * last_ma + rate * torch.mean(et)
            loss = -(torch.mean(t) - torch.mean(et) / torch.mean(ma).detach())
            return loss, ma

        ma = None
        for joint, marginal in batches:
            loss, ma = mine_loss(net, joint, marginal, ma)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
    "running_total_returned_by_a_helper_reaches_no_backward": """
        def add_to(total, loss):
            return total + loss

        running = 0
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            running = add_to(running, loss)
        print(running)
        """,
    "noop_detach_base_does_not_detach": """
        class CarryBase:
            def detach(self):
                self.steps = 0

        class AttnCarry(CarryBase):
            def __init__(self, memory):
                self.memory = memory

            def detach(self):
                pass
        """,
    "noop_detach_class_keeps_nothing": """
        class CarryBase:
            def detach(self):
                self.carry = self.carry.detach()

        class NoCarry(CarryBase):
            def __init__(self):
                self.carry = None

            def detach(self):
                pass
        """,
    "detach_override_that_detaches": """
        class CarryBase:
            def detach(self):
                self.carry = self.carry.detach()

        class AttnCarry(CarryBase):
            def __init__(self, memory):
                self.memory = memory

            def detach(self):
                self.memory = self.memory.detach()
        """,
    "noop_detach_base_unknown": """
        from somewhere import CarryBase

        class AttnCarry(CarryBase):
            def __init__(self, memory):
                self.memory = memory

            def detach(self):
                pass
        """,
    "noop_detach_without_base": """
        class AttnCarry:
            def __init__(self, memory):
                self.memory = memory

            def detach(self):
                pass
        """,
    "module_state_reset_by_a_method": """
        class RNNModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(4, 8, batch_first=True)
                self.fc = nn.Linear(8, 1)
                self.hidden = None

            def reset_hidden(self):
                self.hidden = None

            def forward(self, x):
                out, self.hidden = self.rnn(x, self.hidden)
                return self.fc(out[:, -1])

        for x, y in loader:
            model.reset_hidden()
            F.mse_loss(model(x), y).backward()
            optimizer.step()
        """,
    "module_state_detached_in_forward": """
        class RNNModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(4, 8, batch_first=True)
                self.fc = nn.Linear(8, 1)
                self.hidden = None

            def forward(self, x):
                if self.hidden is not None:
                    self.hidden = tuple(h.detach() for h in self.hidden)
                out, self.hidden = self.rnn(x, self.hidden)
                return self.fc(out[:, -1])

        for x, y in loader:
            F.mse_loss(model(x), y).backward()
            optimizer.step()
        """,
    "module_state_reset_from_the_loop": """
        class RNNModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(4, 8, batch_first=True)
                self.fc = nn.Linear(8, 1)
                self.hidden = None

            def forward(self, x):
                out, self.hidden = self.rnn(x, self.hidden)
                return self.fc(out[:, -1])

        for x, y in loader:
            model.hidden = None
            F.mse_loss(model(x), y).backward()
            optimizer.step()
        """,
    "module_state_never_trained": """
        class RNNModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(4, 8, batch_first=True)
                self.fc = nn.Linear(8, 1)
                self.hidden = None

            def forward(self, x):
                out, self.hidden = self.rnn(x, self.hidden)
                return self.fc(out[:, -1])

        with torch.no_grad():
            for x in stream:
                print(model(x))
        """,
    "module_state_returned_detached": """
        class RNNModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(4, 8, batch_first=True)
                self.fc = nn.Linear(8, 1)
                self.hidden = None

            def forward(self, x):
                out, hidden = self.rnn(x, self.hidden)
                self.hidden = tuple(h.detach() for h in hidden)
                return self.fc(out[:, -1])

        for x, y in loader:
            F.mse_loss(model(x), y).backward()
            optimizer.step()
        """,
    "model_wrapped_in_loop": """
        for rank in ranks:
            model = nn.parallel.DistributedDataParallel(model, device_ids=[rank])
            model(x).sum().backward()
            model = torch.compile(model)
        """,
    "repackage": """
        hidden = model.init_hidden(bs)
        for x, y in batches:
            hidden = repackage_hidden(hidden)
            output, hidden = model(x, hidden)
            criterion(output, y).backward()
        """,
    "detach_method": """
        hidden = model.init_hidden(bs)
        for x, y in batches:
            hidden = hidden.detach()
            output, hidden = model(x, hidden)
            criterion(output, y).backward()
        """,
    "detach_in_place": """
        h = torch.zeros(1, 4, 8)
        for x, y in batches:
            h.detach_()
            out, h = rnn(x, h)
            criterion(out, y).backward()
        """,
    "tuple_detach": """
        state = init()
        for x, y in batches:
            state = tuple(s.detach() for s in state)
            out, state = lstm(x, state)
            criterion(out, y).backward()
        """,
    "reinit_each_batch": """
        for x, y in batches:
            hidden = model.init_hidden(x.size(0))
            output, hidden = model(x, hidden)
            criterion(output, y).backward()
        """,
    "reset_to_none_each_batch": """
        hx = None
        for x, y in batches:
            out, hx = gru(x, hx)
            criterion(out, y).backward()
            hx = None
        """,
    "generation_without_backward": """
        hidden = model.init_hidden(1)
        for t in range(100):
            logits, hidden = model(token, hidden)
            token = logits.argmax(-1)
        """,
    "state_only_passed_in": """
        hidden = model.init_hidden(bs)
        for x, y in batches:
            output = model(x, hidden)
            criterion(output, y).backward()
        """,
    "validation_no_grad": """
        hidden = model.init_hidden(bs)
        for x, y in batches:
            with torch.no_grad():
                out, hidden = model(x, hidden)
            total += crit(out, y).item()
        """,
    "output_path_rebuilt_each_epoch": """
        for epoch in range(epochs):
            for batch in loader:
                accelerator.backward(model(**batch).loss)
                optimizer.step()
                optimizer.zero_grad()
            output_dir = os.path.join(args.output_dir, output_dir)
        """,
    "batch_moved_by_a_helper_of_another_file": """
        for batch in loader:
            batch = move_to_device(batch, device)
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
    "state_tensors_detached_in_place": """
        for data, target in batches():
            hidden[0].detach_()
            hidden[1].detach_()
            output, hidden = model(data, hidden)
            criterion(output, target).backward()
            opt.step()
            opt.zero_grad()
        """,
    "state_rebuilt_from_data": """
        h = net.init_hidden(batch_size)
        for x, y in batches:
            h = tuple([each.data for each in h])
            net.zero_grad()
            output, h = net(x, h)
            criterion(output, y).backward()
            opt.step()
        """,
    "each_state_tensor_detached_in_a_loop": """
        state = None
        for X, Y in data_iter:
            if state is not None:
                for s in state:
                    s.detach_()
            outputs, state = rnn(X, state)
            loss(outputs, Y).backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
    "input_replaced_by_its_encoding": """
        for imgs, caps in loader:
            imgs = encoder(imgs)
            scores = decoder(imgs, caps)
            criterion(scores, caps).backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
    "state_reset_for_each_sequence": """
        for seq, target in pairs:
            hidden = encoder.init_hidden()
            for t in range(seq.size(0)):
                out, hidden = encoder(seq[t], hidden)
            loss = criterion(out, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
    # the recurrent state of the rollout is computed under no_grad: it holds no graph to reach into
    "rollout_state_under_no_grad": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRUCell(8, 64)
                self.pi = nn.Linear(64, 4)

            def step(self, obs, hx):
                hx = self.gru(obs, hx)
                return self.pi(hx), hx.sum(1), hx


        net = Net().to(device)
        hx = torch.zeros(n_envs, 64)
        for update in range(n_updates):
            hx0 = hx.detach().clone()
            for t in range(rollout):
                with torch.no_grad():
                    logits, value, hx = net.step(obs, hx)
            for epoch in range(epochs):
                logits, value, _ = net.step(obs, hx0)
                loss = (value - returns).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """
    ),
    # the input is bound anew from the batch on each arm of an if/elif chain: only a fall-through no arm names
    # would feed the model its own previous output
    "input_bound_on_each_arm_of_an_elif_chain": (
        """
        for x, q in loader:
            if mode == "tokens":
                qx = torch.stack((q, x), dim=0)
            elif mode == "images":
                qx = torch.stack((q, x), dim=-3)
            qx = model(qx)
            loss = qx.mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """
    ),
}


@pytest.mark.parametrize("name", POSITIVE)
def test_positive(name):
    src, expected = POSITIVE[name]
    assert findings(src, "TL008") == expected


@pytest.mark.parametrize("name", NEGATIVE)
def test_negative(name):
    assert findings(NEGATIVE[name], "TL008") == []


def test_fix_tensor_state():
    out = fixed(POSITIVE["function_zeros"][0], "TL008")
    assert "        h = h.detach()\n        out, h = rnn(data[i], h)\n" in out
    assert findings(out, "TL008") == [] and fixed(out, "TL008") == out


def test_fix_tuple_state():
    out = fixed(POSITIVE["tuple_state_lstm"][0], "TL008")
    assert "    state = tuple(h.detach() for h in state)\n    out, state = lstm(x, state)\n" in out


def test_fix_none_initial_state():
    out = fixed(POSITIVE["none_initial"][0], "TL008")
    assert "    if hx is not None:\n        hx = hx.detach() if hasattr(hx, 'detach') else tuple(h.detach() for h in hx)\n" in out
    assert findings(out, "TL008") == []


def test_message():
    """The full text of the finding, so a change of wording is seen here."""
    assert messages(POSITIVE["module_state_lstm"][0], "TL008") == [(
        10, 28,
        "`self.hidden` returned by `self.rnn` is kept on the module and fed back into it by the next "
        "call of the model, without .detach(): the next backward reaches into the previous batch's freed "
        "graph ('Trying to backward through the graph a second time'); detach it before it is fed back",
    )]


def test_noop_detach_override_of_a_base_in_another_file(tmp_path, run_cli):
    (tmp_path / "carry.py").write_text(
        "class CarryBase:\n"
        "    def detach(self):\n"
        "        self.hidden = tuple(h.detach() for h in self.hidden)\n"
    )
    (tmp_path / "attn.py").write_text(
        "from carry import CarryBase\n\n\n"
        "class AttnCarry(CarryBase):\n"
        "    def __init__(self, memory):\n"
        "        self.memory = memory\n\n"
        "    def detach(self):\n"
        "        pass\n"
    )
    (tmp_path / "plain.py").write_text(
        "from carry import CarryBase\n\n\n"
        "class Quiet(CarryBase):\n"
        "    def __init__(self):\n"
        "        self.memory = None\n\n"
        "    def detach(self):\n"
        "        pass\n"
    )
    out = run_cli("-q", "--no-cache", ".", cwd=tmp_path).stdout
    found = [line for line in out.splitlines() if ": TL" in line]
    assert len(found) == 1 and found[0].startswith("attn.py:8:5: TL008"), out
    alone = run_cli("-q", "--no-cache", "--no-project", ".", cwd=tmp_path).stdout
    assert ": TL" not in alone, alone


_CARRIED = """
        def train(model, loader, opt, crit):
            prev = None
            for x, y in loader:
                {top}
                out = model(x)
                loss = crit(out, y)
                if prev is not None:
                    loss = loss + {penalty}
                opt.zero_grad()
                loss.backward()
                opt.step()
                prev = {kept}
        """


def test_an_output_carried_into_the_next_iterations_loss_is_reported_on_its_binding():
    """A temporal-consistency penalty against the previous batch's output, kept with its graph: the second
    backward reaches the first batch's freed graph. Reported without a fix."""
    src = _CARRIED.format(top="pass", penalty="(out - prev).pow(2).mean()", kept="out")
    assert findings(src, "TL008") == [(13, 9)]
    assert "keep `out.detach()`" in messages(src, "TL008")[0][2]
    assert fixed(src, "TL008", unsafe=True) == textwrap.dedent(src)


@pytest.mark.parametrize("top, penalty, kept", [
    ("pass", "(out - prev).pow(2).mean()", "out.detach()"),  # kept cut
    ("prev = prev.detach() if prev is not None else None", "(out - prev).pow(2).mean()", "out"),  # cut at the top
    ("pass", "(out - prev.detach()).pow(2).mean()", "out"),  # read cut
    ("pass", "0.0 * prev.size(0)", "out"),  # only its shape
])
def test_a_carried_output_that_is_cut_or_only_measured_is_not_reported(top, penalty, kept):
    assert findings(_CARRIED.format(top=top, penalty=penalty, kept=kept), "TL008") == []


def test_an_output_bound_before_the_loss_of_the_same_iteration_is_not_carried():
    src = """
        def train(model, loader, opt, crit):
            for x, y in loader:
                out = model(x)
                cur = out
                loss = crit(cur, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        """
    assert findings(src, "TL008") == []
