"""Learnable parameters a module class cuts from the graph wherever it reads them: `self.pos_embed =
nn.Parameter(...)` in `__init__` (on some branch of the configuration), then only `self.pos_embed.detach()` (or
`.data`) in its other methods. Autograd never reaches the parameter, so it keeps its initial value while the rest
of the model trains (the optimizer skips a parameter whose `.grad` stays None)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from torchlint.analysis.exprs import dotted
from torchlint.analysis.model import FileModel
from torchlint.source.walk import walk

# Necessary text (the rules' prefilter): a parameter built, and an attribute of `self` read through a cut on one line
PARAMETER_CALL = re.compile(r"Parameter\s*\(")
SELF_CUT = re.compile(r"self\.\w+(?:\.\w+\([^()\n]*\))*\.(?:detach\(|data\b)")


class _ParameterCutText:
    """Both texts in one file (a test of its own: a rule's requirement is one test or a choice of them)."""

    pattern = PARAMETER_CALL.pattern + "|" + SELF_CUT.pattern
    parts = (PARAMETER_CALL, SELF_CUT)

    def search(self, text: str) -> object:
        return ("Parameter" in text and PARAMETER_CALL.search(text) is not None
                and SELF_CUT.search(text) is not None) or None


PARAMETER_CUT_TEXT = _ParameterCutText()
_PARAMETER_CALLS = frozenset({"nn.Parameter", "torch.nn.Parameter", "Parameter", "nn.parameter.Parameter"})
# methods that keep the tensor they are called on (its graph, or its cut) in what they return
_KEEPING = frozenset({"type_as", "to", "clone", "cuda", "cpu", "float", "half", "double", "bfloat16", "expand",
                      "expand_as", "view", "reshape", "unsqueeze", "squeeze", "contiguous", "repeat", "flatten", "t",
                      "permute", "transpose"})
# methods that set the parameter up or copy weights into it, not a computation that should train it
_SETUP = ("init", "reset", "load", "from_", "copy", "no_weight_decay")  # (read past leading underscores: `__init__`)
_DISPLAY = frozenset({"__repr__", "__str__", "extra_repr"})  # a parameter shown, not computed with


def _computes(method: str) -> bool:
    """A method whose reads of a parameter count: not one that sets it up or loads it, nor one that shows it."""
    return method not in _DISPLAY and not method.lstrip("_").startswith(_SETUP)


@dataclass(frozen=True)
class CutParameter:
    cls: str
    attr: str  # `self.pos_embed`
    cut: cst.CSTNode  # the first cut read: `self.pos_embed....detach()`, or `self.pos_embed.data`


def cut_parameters(model: FileModel) -> Iterator[CutParameter]:
    """Each learnable parameter of a class of the file that every read of it outside set-up methods cuts. Read from
    the whole source (`ast`: the model's tree may have blanked the methods that read it whole), pointed at in the
    model's tree (the method holding the cut keeps its text)."""
    if PARAMETER_CUT_TEXT.search(model.whole_text) is None:
        return
    try:
        tree = ast.parse(model.whole_text)
    except (SyntaxError, ValueError):
        return
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    derived_from = {ast.unparse(b).rpartition(".")[2] for c in classes for b in c.bases
                    if isinstance(b, (ast.Name, ast.Attribute))}  # (the bases the file's classes name)
    for cls in classes:
        learnable = _learnable_parameters(cls)
        if not learnable or cls.name not in model.classes:
            continue
        forward = _run_by_forward(cls)
        if not forward or cls.name in derived_from:
            continue  # a base class others complete (their `forward` may read the parameter whole)
        reads: dict[str, set[str]] = {a: set() for a in learnable}
        cut_in_forward: set[str] = set()
        for m in cls.body:
            if not isinstance(m, ast.FunctionDef) or not _computes(m.name):
                continue  # (binding it, initialising or loading its weights, showing it)
            for attr, how in _reads(m):
                if attr in reads:
                    reads[attr].add(how)
                    if how == "cut" and m.name in forward:
                        cut_in_forward.add(attr)
        for attr, hows in reads.items():
            if hows == {"cut"} and attr in cut_in_forward and f"{attr[5:]}.requires_grad" not in model.whole_text:
                node = _first_cut(model.classes[cls.name], attr)
                if node is not None:
                    yield CutParameter(cls.name, attr, node)


def _run_by_forward(cls: ast.ClassDef) -> set[str]:
    """`forward` and the methods it calls on `self`, two calls deep (`forward_features`); empty without a forward."""
    methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef)}
    found, todo = set(), ["forward"] if "forward" in methods else []
    for _ in range(3):
        found.update(todo)
        todo = [n.func.attr for name in todo for n in ast.walk(methods[name]) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"
                and n.func.attr in methods and n.func.attr not in found]
    return found


def _learnable_parameters(cls: ast.ClassDef) -> set[str]:
    """`self.x` bound in `__init__` to `nn.Parameter(...)` not built with `requires_grad=False`, on a branch its
    arguments' defaults take: not under `if learnable:` with `learnable=False` (the cut is written for the fixed
    table of the other branch); under a test that is not such an argument, only when `__init__` binds it to no
    other value but None."""
    init = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
    found: set[str] = set()
    fixed: set[str] = set()
    undecided: set[str] = set()
    parents = {id(c): p for p in ast.walk(init) for c in ast.iter_child_nodes(p)} if init is not None else {}
    defaults = _defaults(init) if init is not None else {}
    for node in ast.walk(init) if init is not None else ():
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, call = node.targets[0], node.value
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"):
            continue
        if not isinstance(call, ast.Call) or ast.unparse(call.func) not in _PARAMETER_CALLS:
            if not (isinstance(call, ast.Constant) and call.value is None):
                fixed.add(f"self.{target.attr}")
            continue
        taken = _taken_by_default(init, parents, defaults, node)  # type: ignore[arg-type]  # (init is set where node is)
        if taken is False:
            continue
        if taken is None:
            undecided.add(f"self.{target.attr}")
        if any(k.arg == "requires_grad" and not (isinstance(k.value, ast.Constant) and k.value.value is True)
               for k in call.keywords) or len(call.args) > 1:
            continue  # `nn.Parameter(t, requires_grad=False)`, `nn.Parameter(t, False)`: fixed on purpose
        found.add(f"self.{target.attr}")
    return found - (fixed & undecided)


def _defaults(init: ast.FunctionDef) -> dict[str, ast.expr]:
    """The default of each parameter of `__init__` that has one."""
    defaults = dict(zip([a.arg for a in init.args.args][-len(init.args.defaults):] if init.args.defaults else [],
                        init.args.defaults))
    defaults.update((a.arg, d) for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults) if d is not None)
    return defaults


def _taken_by_default(init: ast.FunctionDef, parents: dict[int, ast.AST], defaults: dict[str, ast.expr],
                      node: ast.AST) -> bool | None:
    """Does `__init__` reach `node` when called with its `defaults`? False when the test of an `if` above it
    (`_by_default`) takes the other branch; None when one is not known."""
    child, parent = node, parents.get(id(node))
    while parent is not None and parent is not init:
        if isinstance(parent, ast.If) and child is not parent.test:
            holds = _by_default(parent.test, defaults)
            if holds is None:
                return None
            if holds != (child in parent.body):
                return False
        child, parent = parent, parents.get(id(parent))
    return True


def _by_default(test: ast.expr, defaults: dict[str, ast.expr]) -> bool | None:
    """Whether `test` holds with the arguments at their defaults: a parameter whose default is a constant, its
    `not`, an `and`/`or` of such tests; None when not known."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _by_default(test.operand, defaults)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [_by_default(v, defaults) for v in test.values]
        decisive = isinstance(test.op, ast.Or)  # the value that decides an `or` (True) or an `and` (False)
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    default = defaults.get(test.id) if isinstance(test, ast.Name) else None
    return bool(default.value) if isinstance(default, ast.Constant) else None


def _reads(fn: ast.FunctionDef) -> Iterator[tuple[str, str]]:
    """Each use of an attribute of `self` in the method: "cut" (`self.x.to(d).detach()`, `self.x.data`), "plain",
    or "maintained" (bound, written through `.data`, or changed in place: `self.x.data.mul_(m)`, `self.x.copy_(y)`);
    a test (`if self.x is not None:`, `if self.x:`) is none."""
    parents = {id(c): p for p in ast.walk(fn) for c in ast.iter_child_nodes(p)}
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"):
            continue
        attr = f"self.{node.attr}"
        if not isinstance(node.ctx, ast.Load):
            yield attr, "maintained"
            continue
        parent = parents.get(id(node))
        if isinstance(parent, (ast.If, ast.While, ast.IfExp)) and parent.test is node or isinstance(parent, ast.Compare) \
                and all(isinstance(op, (ast.Is, ast.IsNot)) for op in parent.ops) \
                or isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
            continue
        cur: ast.AST = node
        while isinstance(p := parents.get(id(cur)), ast.Attribute) and p.attr in _KEEPING \
                and isinstance(call := parents.get(id(p)), ast.Call) and call.func is p:
            cur = call
        p = parents.get(id(cur))
        after = parents.get(id(p)) if p is not None else None
        if isinstance(p, ast.Attribute) and p.attr == "data":
            written = not isinstance(p.ctx, ast.Load) or isinstance(after, ast.Subscript) and not isinstance(
                after.ctx, ast.Load) or isinstance(after, ast.Attribute) and after.attr.endswith("_")
            yield attr, "maintained" if written else _combined(p, parents)
        elif isinstance(p, ast.Attribute) and p.attr == "detach" and isinstance(after, ast.Call):
            yield attr, _combined(after, parents)
        elif isinstance(p, ast.Attribute) and p.attr.endswith("_") and not p.attr.startswith("_") \
                and isinstance(after, ast.Call) and after.func is p:
            yield attr, "maintained"
        else:
            yield attr, "plain"


def _combined(cut: ast.AST, parents: dict[int, ast.AST]) -> str:
    """"cut" when the cut value (through value-keeping calls and indexing) is computed with: an operand of
    arithmetic (`x + self.pos.detach()`) or an argument of a call beside another value (`torch.matmul(x, self.w.data)`;
    not a constant: `td.set("action", self.bias.detach())`, a test policy's constant action, is "alone")."""
    node: ast.AST = cut
    while True:
        p = parents.get(id(node))
        if isinstance(p, ast.Subscript) and p.value is node:
            node = p
        elif isinstance(p, ast.Attribute) and p.attr in _KEEPING and isinstance(call := parents.get(id(p)), ast.Call):
            node = call
        else:
            break
    p = parents.get(id(node))
    others = [a for a in (*p.args, *(k.value for k in p.keywords)) if a is not node and not isinstance(a, ast.Constant)] \
        if isinstance(p, ast.Call) and node in p.args else []
    if isinstance(p, ast.Call) and ast.unparse(p.func).rpartition(".")[2] in _NOT_DIFFERENTIABLE:
        return "alone"  # `torch.bucketize(x, self.bins.detach())`: no gradient reaches the bins either way
    if isinstance(p, ast.BinOp) or others:
        return "cut"
    return "alone"


# torch functions with no gradient for their arguments: a value cut before them loses nothing.
_NOT_DIFFERENTIABLE = frozenset({"bucketize", "searchsorted", "histc", "argmax", "argmin", "argsort", "unique"})


def _first_cut(cls: cst.ClassDef, attr: str) -> cst.CSTNode | None:
    """The first cut read of `attr` in the class's methods (not set-up ones), in the model's tree."""
    for m in cls.body.body:
        if type(m) is not cst.FunctionDef or not _computes(m.name.value):
            continue
        for node in walk(m):
            if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "detach":
                base = node.func.value
            elif type(node) is cst.Attribute and node.attr.value == "data":
                base = node.value
            else:
                continue
            while type(base) is cst.Call and type(base.func) is cst.Attribute and base.func.attr.value in _KEEPING:
                base = base.func.value
            if dotted(base) == attr:
                return node
    return None
