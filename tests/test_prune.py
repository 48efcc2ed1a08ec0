"""Pruning before parsing (torchlint.analysis.prune) keeps line numbers and never changes what is found."""

from __future__ import annotations

import ast
import re
import functools
import textwrap
from pathlib import Path

import pytest

from tests.conftest import positive_sources
from torchlint.engine import lint_source
from torchlint.analysis.prune import MIN_LINES, prune
from torchlint.rules import ALL_RULES

TRIGGERS = [c for rule in ALL_RULES for c in rule.scope_conditions()]

UNRELATED = "".join(
    f"\n\ndef unrelated_{i}(a, b):\n    # nothing to do with training\n    return [a * j + b for j in range({i})]\n"
    for i in range(120)
)
TRAINER = textwrap.dedent(
    """
    class Trainer:
        def __init__(self, model):
            self.model = model
            self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        def describe(self):
            return repr(self.model)

        def clear(self):
            self.optimizer.zero_grad()

        def fit(self, loader):
            for x, y in loader:
                self.clear()
                loss = compute(self.model, x, y)
                loss.backward()
                self.optimizer.step()
    """
)


SAMPLE = "import torch\n" + UNRELATED + TRAINER + textwrap.dedent(
    """

    def compute(model, x, y):
        return F.mse_loss(model(x), y)


    total = 0
    for x, y in loader:
        total = total + F.mse_loss(model(x), y)
        total.backward()
        opt.step()
    """
)


def test_prunes_unrelated_functions_and_keeps_lines():
    assert len(SAMPLE.splitlines()) >= MIN_LINES
    pruned = prune(SAMPLE, TRIGGERS)
    assert len(pruned.splitlines()) == len(SAMPLE.splitlines())
    tree = ast.parse(pruned)
    names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert "unrelated_7" not in names and "describe" not in names
    assert {"fit", "clear", "compute", "__init__"} <= names  # helpers called from fit, and __init__, are kept
    assert "total = total + F.mse_loss(model(x), y)" in pruned


def test_same_findings_with_and_without_pruning():
    whole = lint_source(SAMPLE, "t.py", with_edits=True)  # with_edits parses the whole text
    pruned = lint_source(SAMPLE, "t.py")
    assert [(d.line, d.column, d.code) for d in pruned] == [(d.line, d.column, d.code) for d in whole]
    assert {d.code for d in whole} == {"TL001", "TL004"}


@functools.lru_cache(maxsize=None)
def _unpadded(src: str) -> tuple[tuple[int, int, str], ...]:
    return tuple((d.line, d.column, d.code) for d in lint_source(src, "t.py"))  # (the same for both paddings)


@pytest.mark.parametrize("padding", ["before", "after"])
def test_rule_examples_survive_pruning(padding):
    """Every positive example, padded past MIN_LINES with unrelated functions, is found at the same place."""
    for _, src in positive_sources():
        padded = UNRELATED + "\n" + src if padding == "before" else src + "\n" + UNRELATED
        offset = len((UNRELATED + "\n").splitlines()) if padding == "before" else 0
        expected = [(line + offset, column, code) for line, column, code in _unpadded(src)]
        assert prune(padded, TRIGGERS) != padded
        assert [(d.line, d.column, d.code) for d in lint_source(padded, "t.py")] == expected, src


def test_small_or_unparsable_files_are_left_alone():
    assert prune("def f():\n    pass\n", TRIGGERS) == "def f():\n    pass\n"
    broken = UNRELATED + "\ndef (:\n"
    assert prune(broken, TRIGGERS) == broken


def test_callers_of_relevant_helpers_are_kept():
    """The loop lives in `fit`, which has no trigger itself: it calls the helper that back-propagates."""
    src = UNRELATED + textwrap.dedent(
        """
        class Trainer:
            def train_step(self, batch):
                loss = self.model(batch).loss
                loss.backward()
                self.optimizer.step()

            def fit(self, loader):
                for batch in loader:
                    self.train_step(batch)
        """
    )
    assert [(d.code, d.line) for d in lint_source(src, "t.py")] == [
        (d.code, d.line) for d in lint_source(src, "t.py", with_edits=True)
    ] == [("TL004", len(src.splitlines()) - 4)]


def _same_findings(src: str) -> list[tuple[str, int]]:
    pruned = [(d.code, d.line, d.column) for d in lint_source(src, "t.py")]
    whole = [(d.code, d.line, d.column) for d in lint_source(src, "t.py", with_edits=True)]
    assert pruned == whole
    return [(c, line) for c, line, _ in pruned]


def test_helpers_two_levels_deep_are_kept():
    """The loop in `fit`, the step one call down, the backward two calls down: all three are kept."""
    src = UNRELATED + textwrap.dedent(
        """
        class Trainer:
            def do_backward(self, loss):
                loss.backward()

            def step_batch(self, batch):
                self.do_backward(self.model(batch).loss)
                self.optimizer.step()

            def fit(self, loader):
                for batch in loader:
                    self.step_batch(batch)
        """
    )
    pruned = prune(src, TRIGGERS)
    assert "loss.backward()" in pruned and "self.optimizer.step()" in pruned and "unrelated_7" not in pruned
    assert _same_findings(src) == [("TL004", len(src.splitlines()) - 4)]


def test_scheduler_built_elsewhere_keeps_its_builder_and_the_loop():
    """The scheduler is known only from `configure` (not __init__); the loop steps it with no backward in sight."""
    src = UNRELATED + textwrap.dedent(
        """
        class Trainer:
            def configure(self):
                self.opt = make_optimizer()
                self.lr_policy = StepLR(self.opt, 10)

            def fit(self, loader):
                for batch in loader:
                    self.lr_policy.step()
                    self.opt.step()
        """
    )
    pruned = prune(src, TRIGGERS)
    assert "StepLR(self.opt, 10)" in pruned and "self.lr_policy.step()" in pruned
    assert _same_findings(src) == [("TL011", len(src.splitlines()) - 1)]


def test_closure_passed_by_name_is_kept():
    src = UNRELATED + textwrap.dedent(
        """
        def closure():
            loss = F.mse_loss(model(x), y)
            loss.backward()
            return loss


        def train(optimizer):
            for _ in range(10):
                optimizer.step(closure)
        """
    )
    assert "loss.backward()" in prune(src, TRIGGERS)
    assert _same_findings(src) == [("TL004", len(src.splitlines()))]


def test_functions_that_cannot_hold_a_finding_are_dropped():
    """A test that back-propagates once (no loop, nothing detached) and a method that only mentions a
    Scheduler class hold nothing: both go, the training loop stays."""
    src = UNRELATED + textwrap.dedent(
        """
        def test_gradient():
            x = torch.ones(3, requires_grad=True)
            (x * 2).sum().backward()
            assert x.grad is not None


        class Scheduler:
            def codegen(self):
                for node in self.nodes:
                    node.step_forward()


        def train(model, loader, opt):
            for x, y in loader:
                loss = F.mse_loss(model(x), y)
                loss.backward()
                opt.step()
        """
    )
    pruned = prune(src, TRIGGERS)
    assert "(x * 2).sum().backward()" not in pruned and "node.step_forward()" not in pruned
    assert "opt.step()" in pruned and len(pruned.splitlines()) == len(src.splitlines())
    assert _same_findings(src) == [("TL004", len(src.splitlines()))]


def test_builders_kept_are_those_the_model_reads():
    """Pruning keeps every function that constructs something `names.role_of_value` recognises: whatever it
    takes for an optimizer, scheduler, scaler or Accelerate/DeepSpeed object matches prune._DEFINES."""
    import libcst as cst

    from torchlint.analysis import prune as pruning
    from torchlint.analysis.names import OPTIMIZER_CLASSES, role_of_value

    calls = [f"{prefix}{cls}(params)" for cls in sorted(OPTIMIZER_CLASSES) for prefix in ("", "torch.optim.", "optim.")]
    calls += [
        "torch.optim.lr_scheduler.LambdaLR(opt, f)", "StepLR(opt, 10)", "OneCycleLR (opt, 1.0)", "CosineLRScheduler(opt)",
        "MyScheduler(opt)", "get_linear_schedule_with_warmup(opt, 10, 100)", "transformers.get_cosine_schedule(opt)",
        "WarmupSchedule(opt)", "ReduceLROnPlateau(opt)", "GradScaler()", "torch.cuda.amp.GradScaler()",
        "Accelerator()", "L.Fabric()", "self.optimizers()", "torch.optim.Foo(p)",
        "make_model(x)", "nn.Linear(3, 4)", "DataLoader(ds)", "scheduler_config(x)",
    ]
    recognised = 0
    for call in calls:
        if role_of_value(cst.parse_expression(call)) is not None:
            recognised += 1
            assert pruning._DEFINES.search(f"    x = {call}\n"), call
    assert recognised == len(calls) - 4  # the last four are not builders
    assert pruning._DEFINES.search("    engine, opt, _, _ = deepspeed.initialize(model=m)\n")  # Symbols.record


@pytest.fixture
def ast_parses(monkeypatch) -> list[int]:
    """The length of each text `ast` parses (through torchlint.source.pyast) while the test runs."""
    from torchlint.source import pyast

    calls: list[int] = []
    parse = pyast.parse

    def counted(text, *args, **kwargs):
        calls.append(len(text))
        return parse(text, *args, **kwargs)

    monkeypatch.setattr(pyast, "parse", counted)
    return calls


def test_a_pruned_file_with_findings_is_parsed_by_ast_once(ast_parses):
    """Pruning parses the file with `ast`; the positions of its findings come from that same tree, not from a
    second parse (on files of training code with a few helpers, a second parse would cost what pruning saves)."""
    found = [(d.line, d.code) for d in lint_source(SAMPLE, "t.py")]
    assert sorted(code for _, code in found) == ["TL001", "TL004"]
    assert ast_parses == [len(SAMPLE)]


def test_training_code_with_small_helpers_is_pruned():
    """A file of a hundred lines, mostly training loops, with small helpers beside them: the helpers are blanked
    (the ast pass pays for itself once a tenth of the text can go), the loops kept, the findings unchanged."""
    loop = ("def train_{i}(model, loader, opt):\n    for x, y in loader:\n        loss = crit(model(x), y)\n"
            "        loss.backward()\n        opt.step()\n        opt.zero_grad()\n\n\n"
            "def helper_{i}(xs):\n    return [x * {i} for x in xs if x]\n\n\n")
    src = "import torch\n\n\n" + "".join(loop.format(i=i) for i in range(6)) + (
        "total = 0\nfor x, y in loader:\n    total = total + crit(net(x), y)\n    total.backward()\n"
        "    opt.step()\n    opt.zero_grad()\n")
    pruned = prune(src, TRIGGERS)
    assert "helper_" not in pruned and pruned.count("def train_") == 6
    assert pruned.count("\n") == src.count("\n")
    from torchlint.engine import _diagnostics
    from torchlint.pipeline.analyze import analyze

    unpruned = _diagnostics(analyze(src, "t.py", ALL_RULES, whole=True), src, "t.py")
    assert lint_source(src, "t.py") == unpruned
    assert [(d.line, d.code) for d in unpruned] == [(79, "TL001")]


def test_exports_of_a_pruned_file_are_placed_from_the_same_ast(ast_parses):
    """A file summarised for its callers (analysis.exports) is pruned, and its exported events' lines come from
    pruning's `ast`, not from a second parse."""
    from torchlint.analysis.exports import compute_exports

    exports = compute_exports(SAMPLE, frozenset({"Trainer.fit", "Trainer.clear", "compute"}))
    assert exports is not None and exports.classes["Trainer"]["clear"].events[0].line == 612
    assert ast_parses == [len(SAMPLE)]


def test_definitions_under_module_blocks_and_in_nested_classes_are_pruned():
    """`if HAS_CUDA:` at module level and a class nested in a class (torch's test suites) hold definitions too:
    those that cannot matter are blanked, and the nested class's training method keeps its `self.` helper."""
    unrelated = textwrap.indent(UNRELATED, "    ")
    src = "import torch\n\nif HAS_CUDA:\n" + unrelated + "\n\nclass Suite:\n    class _Base:\n" + textwrap.indent(
        textwrap.dedent(
            """
            def describe(self):
                return "base"

            def clear(self):
                self.optimizer.zero_grad()

            def fit(self, loader):
                for x, y in loader:
                    loss = F.mse_loss(self.model(x), y)
                    loss.backward()
                    self.clear()
                    self.optimizer.step()
            """
        ),
        "        ",
    )
    pruned = prune(src, TRIGGERS)
    assert len(pruned.splitlines()) == len(src.splitlines())
    names = {n.name for n in ast.walk(ast.parse(pruned)) if isinstance(n, ast.FunctionDef)}
    assert "unrelated_7" not in names and "describe" not in names
    assert {"fit", "clear"} <= names
    cleared = src.splitlines().index("            self.optimizer.zero_grad()") + 1
    assert _same_findings(src) == [("TL006", cleared)]


REFERENCES = '''
def helper(x):
    return x
def helper_2(x):
    return helper(x) + fit
class T:
    def fit(self, x):
        self.fit; self .fit; self.
fit; myself.fit(x); a.self.fit(x); obj.fit (x); obj.
  fit(x); obj. helper(x); fit2(x); xhelper(x); obj.helper
        def  helper(y): return helper_2
'''


@pytest.mark.parametrize("text", [REFERENCES] + [p.read_text(encoding="utf-8") for p in sorted(
    (Path(__file__).parent.parent / "torchlint" / "analysis").glob("*.py"))[:12]])
def test_references_are_the_words_the_call_patterns_find(text):
    """A name's uses found by looking for the name are those that reading every word with the three call patterns
    (a bare name, `self.name`, `obj.name(`) finds: written here as those patterns, for the functions of the text."""
    from torchlint.analysis.prune import _references

    names = set(re.findall(r"def\s+(\w+)", text))
    bare = re.compile(r"(?<![\w.])(?<!def )[A-Za-z_]\w*")
    own = re.compile(r"\bself\s*\.\s*([A-Za-z_]\w*)")
    method = re.compile(r"(?<!self)\.\s*([A-Za-z_]\w*)\s*\(")
    expected = {(m.start(), "bare", m.group()) for m in bare.finditer(text) if m.group() in names}
    expected |= {(m.start(1), "self", m.group(1)) for m in own.finditer(text) if m.group(1) in names}
    expected |= {(m.start(1), "method", m.group(1)) for m in method.finditer(text) if m.group(1) in names}
    found = _references(text, names)
    assert found == sorted(found)
    assert set(found) == expected
    if text is REFERENCES:
        assert {(how, n) for _, how, n in found} == {
            ("bare", "helper"), ("bare", "helper_2"), ("bare", "fit"), ("self", "fit"), ("method", "fit"), ("method", "helper")
        }
