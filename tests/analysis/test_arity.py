"""Code that cannot run (torchlint.analysis.arity): a call that misses a required argument of the function or of the
module's forward it runs raises TypeError, so the events only it leads to are dropped and no rule reports them.
Look-alikes that can run, or whose signature is not known, keep their findings."""

from __future__ import annotations

import json
import textwrap

import libcst as cst
import pytest

from tests.helpers import findings, lint_in_process
from torchlint.analysis.arity import misses_argument, signature_of

LOOP = """
import torch
import torch.nn as nn
{head}
net = {build}
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for x, y, n in loader:
    out = net({args})
    loss = crit(out, y)
    loss.backward()
    opt.step()
"""

NET = """
class Net(nn.Module):
    {decorator}def forward(self, {params}):
        return self.fc(x)
"""


def _src(params="x, lengths", args="x", decorator="", base="nn.Module", build="Net()", head=None):
    net = NET.format(decorator=decorator, params=params).replace("nn.Module", base)
    return LOOP.format(head=net if head is None else head, build=build, args=args)


def test_a_loop_whose_forward_call_misses_an_argument_is_dead():
    """`net(x)` where forward needs `x, lengths`: TypeError on the first batch, before any backward or step."""
    assert findings(_src(), "TL004") == []


def test_the_same_loop_with_the_argument_passed_is_reported():
    assert findings(_src(args="x, n"), "TL004") == [(15, 5)]


@pytest.mark.parametrize("params, args, decorator, base, build", [
    ("x, lengths=None", "x", "", "nn.Module", "Net()"),  # a default
    ("x, *rest", "x, n, y", "", "nn.Module", "Net()"),  # *args takes the rest
    ("x, lengths, **kw", "x, lengths=n", "", "nn.Module", "Net()"),  # given by keyword
    ("x, lengths", "x, lengths=n", "", "nn.Module", "Net()"),
    ("x, lengths", "*batch", "", "nn.Module", "Net()"),  # unpacked: not known
    ("x, lengths", "x", "", "ExternalBase", "Net()"),  # a base outside the file (its __call__ is not known)
    ("x, lengths", "x", "", "nn.Module", "make_net()"),  # built by something the file does not define
])
def test_look_alikes_that_can_run_or_are_not_known_keep_the_finding(params, args, decorator, base, build):
    assert findings(_src(params, args, decorator, base, build), "TL004") == [(15, 5)]


def test_a_decorated_forward_is_not_known():
    """A decorator may change what the method takes (`functools.wraps`, a hook that fills an argument)."""
    assert findings(_src(decorator="@fills_lengths\n    "), "TL004") == [(16, 5)]


def test_a_class_with_its_own_call_is_judged_by_it():
    head = """
class Net(nn.Module):
    def __call__(self, *inputs):
        return self.forward(inputs[0], None)

    def forward(self, x, lengths):
        return self.fc(x)
"""
    assert findings(_src(head=head), "TL004") == [(18, 5)]


def test_a_failing_call_inside_try_leaves_the_code_after_the_try_alive():
    src = textwrap.dedent("""
        import torch
        import torch.nn as nn
        class Net(nn.Module):
            def forward(self, x, lengths):
                return self.fc(x)
        net = Net().to("cpu")
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for x, y in loader:
            try:
                out = net(x)
            except TypeError:
                out = net(x, None)
            loss = crit(out, y)
            loss.backward()
            opt.step()
        """)
    assert findings(src, "TL004") == [(16, 5)]


def test_a_call_of_a_function_of_the_file_missing_an_argument():
    """A helper of the file called with too few arguments before the step: the loop dies there too; called right,
    it is reported."""
    src = textwrap.dedent("""
        import torch
        def compute(model, x, y, weight):
            return weight * crit(model(x), y)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = compute(model, x, y{extra})
            loss.backward()
            opt.step()
        """)
    assert findings(src.format(extra=""), "TL004") == []
    assert findings(src.format(extra=", 0.5"), "TL004") == [(9, 5)]
    # the name rebound to a partial that fills the weight: it can run
    partial = src.format(extra="").replace("opt = torch", "compute = functools.partial(compute, weight=0.5)\nopt = torch")
    assert findings(partial, "TL004") == [(10, 5)]


def test_a_module_attribute_of_known_class_and_a_wrapped_module():
    src = textwrap.dedent("""
        import torch
        import torch.nn as nn
        class Encoder(nn.Module):
            def forward(self, x, mask):
                return x
        class Runner:
            def __init__(self):
                self.enc = nn.DataParallel(Encoder()).cuda()
                self.opt = torch.optim.SGD(self.enc.parameters(), lr=0.1)
            def fit(self, loader):
                for x, y in loader:
                    loss = crit(self.enc({args}), y)
                    loss.backward()
                    self.opt.step()
        """)
    assert findings(src.format(args="x"), "TL004") == []
    assert findings(src.format(args="x, None"), "TL004") == [(15, 13)]


@pytest.mark.parametrize("defn, call, fails", [
    ("def f(a, b): pass", "f(1)", True),
    ("def f(a, b): pass", "f(1, b=2)", False),
    ("def f(a, b): pass", "f(1, 2, 3)", True),  # too many
    ("def f(a, b): pass", "f(1, 2, c=3)", True),  # an unknown keyword
    ("def f(a, b, **kw): pass", "f(1, 2, c=3)", False),
    ("def f(a, *, b): pass", "f(1)", True),  # a keyword-only without default
    ("def f(a, *, b=1): pass", "f(1)", False),
    ("def f(a, /, b): pass", "f(1, 2)", False),
    ("def f(a, b): pass", "f(*xs)", False),
    ("def f(a, b): pass", "f(**kw)", False),
])
def test_misses_argument(defn, call, fails):
    fn = cst.parse_module(defn).body[0]
    expr = cst.parse_expression(call)
    assert isinstance(fn, cst.FunctionDef) and isinstance(expr, cst.Call)
    sig = signature_of(fn, method=False)
    assert sig is not None and misses_argument(sig, expr) is fails


TRAIN = """\
import torch
from models.builder import build_model

model = build_model(16)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for i in range(10):
    out = model({args})
    loss = out.sum()
    loss.backward()
    opt.step()
"""
BUILDER = """\
import torch.nn as nn
from models import Seq2Seq


def build_model(dim):
    model = Seq2Seq(dim)
    model = model.to("cpu")
    return nn.DataParallel(model)
"""
MODELS_INIT = "from .seq import Seq2Seq\n"
SEQ = """\
import torch.nn as nn


class Base(nn.Module):
    pass


class Seq2Seq(Base):
    def __init__(self, dim):
        super().__init__()

    def forward(self, src, src_len, tgt{tail}):
        return src
"""


def _project(tmp_path, args, tail="", base=None):
    (tmp_path / "models").mkdir()
    (tmp_path / "train.py").write_text(TRAIN.format(args=args))
    (tmp_path / "models" / "builder.py").write_text(BUILDER)
    (tmp_path / "models" / "__init__.py").write_text(MODELS_INIT)
    seq = SEQ.format(tail=tail)
    if base is not None:
        seq = seq.replace("class Base(nn.Module)", f"class Base({base})")
    (tmp_path / "models" / "seq.py").write_text(seq)
    code, out = lint_in_process(tmp_path, "--isolated", "--no-cache", ".")
    return [(f["path"], f["line"], f["code"]) for f in json.loads(out)]


def test_a_model_built_in_another_file_whose_forward_the_call_does_not_fill(tmp_path):
    """`model = build_model(16)` (another file: `nn.DataParallel(Seq2Seq(dim).to(...))`, Seq2Seq imported through
    a package's __init__, its base there), `model(x, n)` where forward needs three: the script dies first."""
    assert _project(tmp_path, "x, n") == []


@pytest.mark.parametrize("args, tail, base", [
    ("x, n, t", "", None),  # called right
    ("x, n", "=None", None),  # the third has a default
    ("x, n, t, extra", ", *rest", None),
    ("x, n, tgt=t", "", None),
    ("x, n", "", "SomeLibraryModule"),  # a base outside the project: its __call__ is not known
])
def test_a_model_built_in_another_file_that_can_be_called_so(tmp_path, args, tail, base):
    assert _project(tmp_path, args, tail, base) == [("train.py", 10, "TL004")]
