"""The read-only parse and the plain code generation (torchlint.source.cstfast) give what libcst's public calls
give, and switch off nothing outside the one parse: other constructions, in this thread and in others, are still
validated."""

from __future__ import annotations

import dataclasses
import threading

import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings

from tests.conftest import ROOT
from torchlint.source.cstfast import code_of, enable, parse_read_only

enable()  # the speed-ups these tests compare with libcst's own paths (a worker process of torchlint's switches them on)
from torchlint.source.walk import walk

SOURCES = sorted(ROOT.glob("fixtures/TL*/*/*.py")) + sorted(ROOT.glob("tests/corpus/**/*.py")) + sorted(
    p for p in ROOT.glob("tests/odd_inputs/*.py")
)


def _outcome(parse, text: str):
    try:
        return ("ok", parse(text).code)
    except Exception as exc:  # noqa: BLE001 - the kind of failure is what is compared
        return ("error", type(exc).__name__)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_read_only_parse_is_the_same_tree(path):
    text = path.read_bytes().decode("utf-8", errors="replace")
    checked, fast = cst.parse_module(text), parse_read_only(text)
    assert fast.code == checked.code  # (libcst itself drops a BOM and a final lone \r: torchlint mends those)
    assert fast.deep_equals(checked)


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # generated programs call string literals and the like
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(hypothesmith.from_grammar())
def test_read_only_parse_accepts_and_refuses_what_libcst_does(text):
    assert _outcome(parse_read_only, text) == _outcome(cst.parse_module, text)


@pytest.mark.parametrize("text", ["x = (", "def f(:\n    pass\n", "lambda: (yield)\n", "f(**a, *b)\n", "a = 1 +\n"])
def test_refused_text_is_refused_by_both(text):
    assert _outcome(parse_read_only, text)[0] == _outcome(cst.parse_module, text)[0]


def test_nodes_built_after_a_read_only_parse_are_validated():
    parse_read_only("x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")
    with pytest.raises(cst.CSTValidationError):
        cst.Integer("1.5")


def test_nodes_built_in_another_thread_during_read_only_parses_are_validated():
    text = (ROOT / "fixtures").glob("TL001/*/bad.py").__next__().read_text(encoding="utf-8") * 20
    stop = threading.Event()

    def parse_all_the_time():
        while not stop.is_set():
            parse_read_only(text)

    worker = threading.Thread(target=parse_all_the_time)
    worker.start()
    refused = 0
    try:
        for _ in range(2000):
            try:
                cst.Name("1bad")
            except cst.CSTValidationError:
                refused += 1
    finally:
        stop.set()
        worker.join()
    assert refused == 2000


def test_code_of_writes_what_libcst_writes():
    empty = cst.Module(body=[])
    for path in SOURCES[:40]:
        module = cst.parse_module(path.read_text(encoding="utf-8", errors="replace"))
        for stmt in module.body:
            for node in walk(stmt, descend_scopes=True):
                assert code_of(node) == empty.code_for_node(node)


def _fast_classes() -> list[type]:
    from torchlint.source import cstfast

    parse_read_only("x = 1\n")  # installs the constructors
    return [c for c in cstfast._node_classes() if hasattr(c.__dict__.get("__init__"), "__wrapped__")]


def test_fast_constructors_cover_the_node_classes_the_parser_builds():
    fast = set(_fast_classes())
    for name in ("Name", "Call", "Attribute", "SimpleWhitespace", "Comma", "Arg", "SimpleStatementLine",
                 "IndentedBlock", "FunctionDef", "For", "If", "Module", "ExceptHandler", "Parameters"):
        assert getattr(cst, name) in fast, name


def test_fast_constructors_build_what_the_generated_ones_build():
    """Every node of the sources rebuilt from its fields, once by the faster constructor and once by the one
    dataclasses generated: equal trees, and each default (a factory's product included) equal and not shared."""
    fast = set(_fast_classes())
    seen: set[type] = set()
    for path in SOURCES:
        todo: list[cst.CSTNode] = [parse_read_only(path.read_bytes().decode("utf-8", errors="replace"))]
        while todo:  # every node, whitespace and punctuation included
            node = todo.pop()
            todo.extend(node.children)
            cls = type(node)
            if cls not in fast:
                continue
            seen.add(cls)
            fields = {f.name: getattr(node, f.name) for f in dataclasses.fields(cls)}
            by_fast, by_original = cls(**fields), cls.__new__(cls)
            cls.__init__.__wrapped__(by_original, **fields)
            assert by_fast.deep_equals(by_original) and by_fast.deep_equals(node)
    assert len(seen) > 60
    for cls in fast:
        try:
            a, b = cls.__new__(cls), cls.__new__(cls)
            cls.__init__.__wrapped__(a)
        except TypeError:
            continue  # it has required fields
        except cst.CSTValidationError:
            continue
        cls.__init__(b)
        assert a.deep_equals(b), cls
        for name in (f.name for f in dataclasses.fields(cls)):
            value = getattr(b, name)
            if isinstance(value, cst.CSTNode):
                assert value is not getattr(cls(), name), (cls, name)  # a factory's default is made anew


def test_fast_constructors_validate_and_take_positional_arguments():
    parse_read_only("x = 1\n")
    assert cst.Name("x", [], []).value == "x"
    assert cst.Attribute(cst.Name("a"), cst.Name("b")).attr.value == "b"
    with pytest.raises(cst.CSTValidationError):
        cst.Name("1x")
    with pytest.raises(TypeError):
        cst.Name()  # a required field is still required
    with pytest.raises(TypeError):
        cst.Name("x", nonsense=1)


def test_a_subclass_inheriting_a_fast_constructor_is_built_by_the_generated_one():
    """A subclass may declare a slot of the same name as a field: the faster constructor stores through the
    class's own slot, so an instance of anything else is built by the generated constructor."""
    parse_read_only("x = 1\n")

    class Shadowing(cst.Name):
        __slots__ = ("value",)

    node = Shadowing("x")
    assert node.value == "x"
    assert cst.Module(body=[cst.SimpleStatementLine([cst.Expr(node)])]).code == "x\n"


_UNTOUCHED = """
import libcst as cst
print(cst.CSTNode.__dict__["__post_init__"].__qualname__, cst.Name.__init__.__code__.co_filename,
      cst.Name.__init__.__qualname__)
"""


def _libcst_state(before: str) -> str:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", before + _UNTOUCHED], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_importing_and_calling_torchlint_leaves_libcst_untouched():
    pristine = _libcst_state("")
    assert _libcst_state("import torchlint\ntorchlint.lint_source(open(%r).read(), 'bad.py')\n" % str(
        ROOT / "fixtures" / "TL004" / "script" / "bad.py")) == pristine
    assert _libcst_state("from torchlint.source.cstfast import enable\nenable()\n") != pristine  # the probe sees it


def test_a_flake8_run_with_the_plugin_leaves_libcst_untouched():
    pristine = _libcst_state("")
    run = ("from flake8.main.application import Application\napp = Application()\n"
           "app.run(['--select', 'TL', %r])\nassert app.result_count == 1, app.result_count\n"
           % str(ROOT / "fixtures" / "TL004" / "script" / "bad.py"))
    assert _libcst_state(run) == pristine
