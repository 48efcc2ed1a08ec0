"""Value kinds: what a value is at a definition, from literals, known APIs, arithmetic, contexts, annotations and
the summaries of the file's functions; UNKNOWN when the analysis cannot tell."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis import EventKind, FileModel
from torchlint.analysis.vkind import VKind


def kind_of(src: str, name: str, scope_name: str | None = None) -> VKind:
    """The kind of the last definition of `name` in the scope."""
    text = textwrap.dedent(src)
    model = FileModel(cst.parse_module(text), text)
    scope = next(s for s in model.scopes if scope_name is None or s.name == scope_name)
    defs = [e for e in scope.events if e.kind in (EventKind.ASSIGN, EventKind.RESET) and e.target == name]
    return model.kinds.of_def(defs[-1], scope)


@pytest.mark.parametrize("src, name, expected", [
    ("x = 3", "x", VKind.NUMBER),
    ("x = 'a' + 'b'", "x", VKind.STRING),
    ("out = os.path.join(args.out, out)", "out", VKind.STRING),
    ("t0 = time.perf_counter()\nd = time.perf_counter() - t0", "d", VKind.NUMBER),
    ("v = loss.item()", "v", VKind.NUMBER),
    ("v = loss.detach()", "v", VKind.TENSOR),
    ("v = (total / n).detach().cpu().numpy()", "v", VKind.DATA),
    ("v = model(x).numpy()", "v", VKind.DATA),  # numpy() raises on a tensor that requires grad: never a graph
    ("v = torch.zeros(3)", "v", VKind.TENSOR),
    ("m = nn.Linear(2, 3)\ny = m(x)", "y", VKind.GRAPH),
    ("y = model(x)\nz = y.mean() * 2", "z", VKind.GRAPH),
    ("crit = nn.CrossEntropyLoss()\nl = crit(model(x), y)", "l", VKind.GRAPH),
    ("out = model(**batch)\nloss = out.loss", "loss", VKind.GRAPH),
    ("h = tuple([each.data for each in h])", "h", VKind.DATA),
    ("s = sum(l.item() for l in losses)", "s", VKind.NUMBER),
    ("batch = move_to_device(batch)", "batch", VKind.UNKNOWN),
    ("from .utils import evaluate_model\nr = evaluate_model(m, d)", "r", VKind.UNKNOWN),
    ("r = build_model(cfg)", "r", VKind.UNKNOWN),
    ("acc = correct / len(y)", "acc", VKind.UNKNOWN),
])
def test_module_level_kinds(src, name, expected):
    assert kind_of(src, name) is expected


def test_no_grad_region_has_no_graph():
    src = """
        with torch.no_grad():
            y = model(x)
        """
    assert kind_of(src, "y") is VKind.TENSOR


def test_running_total_of_numbers_round_a_loop():
    src = """
        def f(loader):
            total = 0
            for x, y in loader:
                loss = criterion(model(x), y)
                total += loss.item()
            return total
        """
    assert kind_of(src, "total", "f") is VKind.NUMBER


def test_running_total_of_graphs_after_the_loop_is_a_graph():
    # a number only while nothing was added: once the loop ran, the total holds every term's graph
    src = """
        def run(batches, net, crit):
            acc = 0.0
            for inp, tgt in batches:
                acc += crit(net(inp), tgt)
            mean = acc / len(batches)
        """
    assert kind_of(src, "mean", "run") is VKind.GRAPH


def test_a_number_or_a_graph_from_plain_bindings_stays_unknown():
    src = """
        def run(inp, net, flag):
            val = 0.0
            if flag:
                val = net(inp)
            out = val
        """
    assert kind_of(src, "out", "run") is VKind.UNKNOWN


def test_function_summary_answers_the_call():
    src = """
        def evaluate(model, loader):
            total = 0.0
            for x, y in loader:
                total += criterion(model(x), y).item()
            return total / len(loader), "done"

        def train(model, loader):
            val_loss, status = evaluate(model, loader)
        """
    assert kind_of(src, "val_loss", "train") is VKind.NUMBER
    assert kind_of(src, "status", "train") is VKind.STRING


def test_parameters_by_annotation_default_and_convention():
    src = """
        def f(lr: float, name="run", loss=None, model=None):
            a = lr
            b = name
            c = loss
            d = model(x)
        """
    assert kind_of(src, "a", "f") is VKind.NUMBER
    assert kind_of(src, "b", "f") is VKind.STRING
    assert kind_of(src, "d", "f") is VKind.GRAPH


def test_in_place_detach_makes_the_state_graph_free():
    src = """
        for s in state:
            s.detach_()
        """
    assert kind_of(src, "state") is VKind.TENSOR


@pytest.mark.parametrize("src, name, expected", [
    # an imported loss function, or an alias of one, is a function; calling it gives the loss
    ("from losses import my_loss\nf = my_loss", "f", VKind.UNKNOWN),
    ("from losses import my_loss\nloss_fn = my_loss\nl = loss_fn(out, y)", "l", VKind.GRAPH),
    ("from losses import my_loss\nl = my_loss(out, y)", "l", VKind.GRAPH),
    ("from losses import my_loss\nfn = my_loss\nl = fn(out, y)", "l", VKind.GRAPH),
    ("from losses import my_loss\nloss, mse = my_loss(out, y)", "loss", VKind.GRAPH),
    # look-alikes: an alias of a name that is not a loss, a module attribute, a local loss value
    ("from losses import score\nfn = score\nl = fn(out, y)", "l", VKind.UNKNOWN),
    ("import losses as L\nl = L.compute(out, y)", "l", VKind.UNKNOWN),
    ("y = model(x)\nl = y.mean()\nv = l", "v", VKind.GRAPH),
])
def test_imported_loss_functions(src, name, expected):
    assert kind_of(src, name) is expected


def test_a_loss_named_callable_is_not_a_graph_tensor():
    # `self.loss_func` set from an unknown call, a parameter called in its function, a `*_fn` parameter: functions
    src = """
        class T:
            def __init__(self, spec):
                self.loss_func = self._get_loss_func(spec)

            def fit(self):
                f = self.loss_func
                l = f(self.net(x), y)

        def g(adv_loss, x):
            a = adv_loss
            return adv_loss(x)

        def h(total_loss):
            t = total_loss
        """
    assert kind_of(src, "f", "fit") is VKind.UNKNOWN
    assert kind_of(src, "l", "fit") is VKind.GRAPH  # what the loss function computes
    assert kind_of(src, "a", "g") is VKind.UNKNOWN
    assert kind_of(src, "t", "h") is VKind.GRAPH  # a loss handed in as a parameter, never called: a graph tensor


@pytest.mark.parametrize("src, name, expected", [
    # a module's parameters require grad: what is computed from them has a graph
    ("def f(model):\n    p = model.module.head.weight.norm()", "p", VKind.GRAPH),
    ("def f(trainer):\n    p = trainer.model.bias * 2", "p", VKind.GRAPH),
    ("class Net(nn.Module):\n    def f(self):\n        p = self.fc.weight.sum()", "p", VKind.GRAPH),
    # look-alikes: `weight` of something not known to be a module, or read under no_grad
    ("def f(x):\n    p = x.weight.sum()", "p", VKind.UNKNOWN),
    ("def f(model):\n    with torch.no_grad():\n        p = model.weight.sum()", "p", VKind.TENSOR),
])
def test_parameters_of_a_module_carry_a_graph(src, name, expected):
    assert kind_of(src, name, "f") is expected


DICT_RETURNED = """
    class PairLoss:
        def __init__(self):
            self.mse = nn.MSELoss()

        def __call__(self, out, y):
            fit = self.mse(out, y)
            return fit, {"fit": fit, "count": len(y)}


    def make_loss() -> PairLoss:
        return PairLoss()


    def step(model, x, y):
        crit = make_loss()
        total, parts = crit(model(x), y)
        fit = parts["fit"]
        count = parts["count"]
        either = parts[key]
        return {"fit": fit, "count": count}


    def train(model, x, y):
        got = step(model, x, y)
        kept = got["fit"]
        for name, value in got.items():
            seen = value
    """


@pytest.mark.parametrize("name, scope, expected", [
    ("total", "step", VKind.GRAPH),  # the class a factory's return annotation names: its `__call__` runs
    ("fit", "step", VKind.GRAPH),  # an entry of the returned dict, by its literal key
    ("count", "step", VKind.NUMBER),
    ("either", "step", VKind.UNKNOWN),  # a key not written as a literal: any entry, and they differ
    ("kept", "train", VKind.GRAPH),  # through a function of the file that returns a dict literal
    ("seen", "train", VKind.UNKNOWN),  # the values of `.items()` differ in kind: not known
])
def test_dict_entries_known_by_key(name, scope, expected):
    assert kind_of(DICT_RETURNED, name, scope) is expected


@pytest.mark.parametrize("expr, expected", [
    # an index, an order or a truth value of a graph: no graph
    ("torch.max(out, dim=1)[1]", VKind.TENSOR),
    ("torch.max(out, 1)[1]", VKind.TENSOR),
    ("out.max(1)[1]", VKind.TENSOR),
    ("out.topk(5).indices", VKind.TENSOR),
    ("out.argmax(1)", VKind.TENSOR),
    ("torch.argmax(out, 1)", VKind.TENSOR),
    ("torch.eq(out.argmax(1), y)", VKind.TENSOR),
    ("out.eq(y)", VKind.TENSOR),
    # the values keep their graph; `torch.max(a, b)` (elementwise) has no indices
    ("torch.max(out, 1)[0]", VKind.GRAPH),
    ("torch.max(out)", VKind.GRAPH),
    ("torch.max(out, other)", VKind.GRAPH),
])
def test_indices_and_truth_values_of_a_graph_carry_none(expr, expected):
    assert kind_of(f"out = model(x)\nv = {expr}", "v") is expected


def test_a_tensor_written_by_index_carries_the_graph_of_what_is_written():
    # `outputs[t] = decoder(x)` copies the value in with its gradient: the tensor is part of the graph from then on
    src = """
        def decode(model, x, steps):
            outputs = torch.zeros(steps, 3)
            for t in range(steps):
                outputs[t] = model(x)
            total = outputs.sum()
            preds = torch.zeros(steps)
            for t in range(steps):
                preds[t] = model(x).argmax()
            counts = preds.sum()
            with torch.no_grad():
                kept = torch.zeros(steps)
                for t in range(steps):
                    kept[t] = model(x).mean()
            mean = kept.mean()
            crops = torch.zeros(steps, 3)
            for t in range(steps):
                crops[t] = random_crop(x)
            pixels = crops.sum()
        """
    assert kind_of(src, "total", "decode") is VKind.GRAPH
    assert kind_of(src, "pixels", "decode") is VKind.TENSOR  # a value of unknown kind written in: as it was
    assert kind_of(src, "counts", "decode") is VKind.TENSOR
    assert kind_of(src, "mean", "decode") is VKind.TENSOR


def test_a_criterion_built_in_the_call_passes_on_the_graph_of_its_inputs():
    src = """
        def compare(recon, x):
            return nn.MSELoss()(recon, x)

        def step(model, x):
            out = compare(model(x), x)
        """
    assert kind_of(src, "out", "step") is VKind.GRAPH


def test_the_items_a_module_of_the_file_returns_when_moved_to_a_device():
    # `Net().to(device)` is still a `Net`: its forward says what each item of the tuple it returns is
    src = """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                return torch.sigmoid(self.fc(x)), x.shape[0]

        net = Net().to(device)
        out, n = net(x)
        """
    assert kind_of(src, "out") is VKind.GRAPH
    assert kind_of(src, "n") is VKind.NUMBER
