"""Small, allocation-light queries on libcst expressions shared by the model and the rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import libcst as cst

from torchlint.analysis.semantics import GRAPH_REDUCTIONS, NUMBER_MODULES, SHAPE_READS
from torchlint.source.cstfast import code_of  # noqa: F401 - re-exported: the rules' one way to a node's code
from torchlint.source.walk import walk


def dotted(node: cst.CSTNode | None) -> str | None:
    """`a.b.c` for a chain of attribute accesses on a name, else None."""
    parts: list[str] = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is cst.Name:
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def container_name(target: cst.BaseExpression) -> str | None:
    """The name of the container a subscript reads or stores into (`d[k][0]` -> `d`), or the dotted name itself."""
    while type(target) is cst.Subscript:
        target = target.value
    return dotted(target)


def last_part(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def is_true(node: cst.CSTNode | None) -> bool:
    return type(node) is cst.Name and node.value == "True"


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def positional(call: cst.Call, index: int) -> cst.Arg | None:
    pos = [a for a in call.args if a.keyword is None and not a.star]
    return pos[index] if index < len(pos) else None


def positional_params(node: cst.CSTNode) -> list[str]:
    """The names of a function's positional parameters, in order (`self` included); none for anything else."""
    if type(node) is not cst.FunctionDef:
        return []
    return [p.name.value for p in (*node.params.posonly_params, *node.params.params)]


def argument_for(call: cst.Call, params: list[str], param: str) -> cst.BaseExpression | None:
    """What `call` passes for `param`, of a function whose positional parameters, as the call fills them, are
    `params` (without `self` for a method called on an object): by keyword, else by position among the positional
    arguments that are not starred; None when it leaves the default."""
    keyword = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == param), None)
    if keyword is not None or param not in params:
        return keyword
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    index = params.index(param)
    return positional[index] if index < len(positional) else None


def calls_anything(node: cst.CSTNode) -> bool:
    """Does evaluating `node` call something (whose result, or what it changes, the names it reads do not tell)?"""
    return any(type(n) is cst.Call for n in walk(node))


def names_in(node: cst.CSTNode) -> set[str]:
    """Every variable name and dotted attribute chain that `node` reads (`self.total.data` gives
    `self.total.data`, `self.total` and `self`)."""
    if type(node) is cst.Name:
        return {node.value}
    names: set[str] = set()

    def dotted_prefixes(n: cst.CSTNode) -> bool:
        cls = type(n)
        if cls is cst.Name:
            names.add(n.value)  # type: ignore[attr-defined]  # by cls = type(n)
            return True
        if cls is cst.Attribute:
            name = dotted(n)
            if name is not None:
                while True:
                    names.add(name)
                    if "." not in name:
                        return True
                    name = name.rsplit(".", 1)[0]
            return False
        return False

    for _ in walk(node, prune=dotted_prefixes):
        pass
    return names


def operand_names(node: cst.CSTNode, graph_only: bool = False) -> set[str]:
    """The names `node` computes with: `names_in` without what it calls (`model(x)` gives `x`, not `model`;
    `self.model(x)` gives `self` and `x`; `out.sum()` gives `out`, the receiver of a method). With `graph_only`, the
    names whose graphs its value may carry: not what a cut (`x.detach()`, `x.item()`, `x.data`), a shape or count
    (`len(bank)`, `x.size(0)`), an index (`bank[i]` gives `bank`, not `i`) or a comparison (`out.argmax(1) == y`)
    reads."""
    names: set[str] = set()
    todo = [node]

    def visit(n: cst.CSTNode) -> bool:  # True: do not walk into `n`
        cls = type(n)
        if graph_only and (cls in (cst.Call, cst.Attribute, cst.Subscript) and as_detachment(n) is not None
                           or cls is cst.Comparison or cls is cst.Attribute and n.attr.value in SHAPE_READS):  # type: ignore[attr-defined]
            return True
        if cls is cst.Call:
            func = n.func  # type: ignore[attr-defined]  # by cls = type(n)
            if type(func) is cst.Attribute:
                if graph_only and func.attr.value in _GRAPH_FREE_METHODS:
                    return True
                todo.append(func.value)
            elif type(func) is not cst.Name:
                todo.append(func)
            elif graph_only and func.value in _GRAPH_FREE_CALLS:
                return True
            todo.extend(arg.value for arg in n.args)  # type: ignore[attr-defined]  # as above
            return True
        if graph_only and cls is cst.Subscript:
            todo.append(n.value)  # type: ignore[attr-defined]  # as above
            return True
        if cls is cst.Name or (cls is cst.Attribute and dotted(n) is not None):
            names.update(names_in(n))
            return True
        return False

    while todo:
        for _ in walk(todo.pop(), prune=visit):
            pass
    return names


# What only reads a count, a shape, an index or a truth value of its operands: the result carries no graph of them.
_GRAPH_FREE_CALLS = frozenset({"len", "int", "bool", "str", "range", "isinstance", "round"})
_GRAPH_FREE_METHODS = SHAPE_READS | {"argmax", "argmin", "eq", "ne", "gt", "ge", "lt", "le", "nonzero", "long", "bool",
                                     "sign", "isnan", "isfinite", "isinf", "any", "all"}


def graph_operand_names(node: cst.CSTNode) -> set[str]:
    """`operand_names(node, graph_only=True)`."""
    return operand_names(node, graph_only=True)


@dataclass(frozen=True)
class Detachment:
    """An expression that cuts its operand out of the autograd graph."""

    node: cst.BaseExpression  # the whole detaching expression, e.g. `loss.data[0]`
    operand: cst.BaseExpression  # what is detached, e.g. `loss`
    how: str  # ".data", ".data[...]", ".item()", ".detach()", "float()", ".tolist()"


_DETACH_METHODS = {"item": ".item()", "detach": ".detach()", "tolist": ".tolist()"}
# Links a chain of cuts may also hold: they keep the numbers (a device, a NumPy view, a copy), so the chain as a
# whole still stands for its innermost operand (`x.detach().cpu().numpy()`).
_KEEPING_LINKS = frozenset({"cpu", "cuda", "numpy", "clone", "contiguous", "float", "double"})


def as_detachment(node: cst.CSTNode) -> Detachment | None:
    """`node` as a cut of its operand out of the graph. A chain of cuts and value-keeping links
    (`x.detach().item()`, `x.data.item()`, `x.cpu().detach()`) is one detachment of its innermost operand, so
    that the kind test sees what was detached and a fix removes the whole chain."""
    links: list[tuple[str, bool]] = []  # (how, cuts) from the outermost link inwards
    operand = node
    while (link := _link(operand)) is not None:
        operand, how, cuts = link
        links.append((how, cuts))
    if not any(cuts for _, cuts in links):
        return None
    how = ""
    for text, _ in reversed(links):
        how = f"float({how})" if text == "float()" else how + text
    return Detachment(node, operand, how)  # type: ignore[arg-type]  # a node with a detaching link is an expression


def _link(node: cst.CSTNode) -> tuple[cst.BaseExpression, str, bool] | None:
    """One link of a detaching chain: (what it is applied to, how it is written, whether it cuts the graph)."""
    if type(node) is cst.Attribute and node.attr.value == "data":
        return node.value, ".data", True
    if (
        type(node) is cst.Subscript
        and type(node.value) is cst.Attribute
        and node.value.attr.value == "data"
    ):
        return node.value.value, ".data[...]", True
    if type(node) is cst.Call:
        func = node.func
        if type(func) is cst.Attribute and not node.args:
            method = func.attr.value
            if method in _DETACH_METHODS:
                return func.value, _DETACH_METHODS[method], True
            if method in _KEEPING_LINKS:
                return func.value, f".{method}()", False
        if (
            type(func) is cst.Name
            and func.value == "float"
            and len(node.args) == 1
            and node.args[0].keyword is None
            and not node.args[0].star
        ):
            return node.args[0].value, "float()", True
    return None


def is_self_accumulation(target: str, value: cst.BaseExpression) -> cst.BaseExpression | None:
    """For `t = t + x` (or `x + t`, `t + a + b`) return the added part's top expression, else None. Also
    `t = torch.cat([t, x])` (a tensor grown by concatenation keeps every part, graph included) and a conditional
    whose arm accumulates (`t = x if t is None else t + x`)."""
    if type(value) is cst.IfExp:
        return is_self_accumulation(target, value.orelse) or is_self_accumulation(target, value.body)
    if type(value) is cst.Call:
        return _concatenated(target, value)
    if type(value) is not cst.BinaryOperation or type(value.operator) is not cst.Add:
        return None
    node: cst.BaseExpression = value
    # Walk the left spine of `t + a + b`; `t` must be one of the summands at the top level.
    summands: list[cst.BaseExpression] = []
    while type(node) is cst.BinaryOperation and type(node.operator) is cst.Add:
        summands.append(node.right)
        node = node.left
    summands.append(node)
    for i, s in enumerate(summands):
        if dotted(s) == target or _scaled(s, target):
            rest = summands[:i] + summands[i + 1 :]
            return rest[0] if len(rest) == 1 else value
    return None


_CONCATENATIONS = frozenset({"cat", "concat", "concatenate", "hstack", "vstack", "row_stack", "column_stack", "dstack"})


def _concatenated(target: str, call: cst.Call) -> cst.BaseExpression | None:
    """`torch.cat([t, x], 0)`: the part joined to `t` (the whole sequence when it holds more than one other)."""
    name = dotted(call.func) or ""
    if not name.startswith("torch.") or name.rsplit(".", 1)[-1] not in _CONCATENATIONS or not call.args:
        return None
    parts = call.args[0].value
    if type(parts) is not cst.List and type(parts) is not cst.Tuple:
        return None
    elements = [e.value for e in parts.elements if type(e) is cst.Element]
    others = [e for e in elements if dotted(e) != target]
    if len(others) == len(elements) or not others:
        return None
    return others[0] if len(others) == 1 else parts


def _scaled(summand: cst.BaseExpression, target: str) -> bool:
    """`c * t` or `t * c`: the total scaled by a factor that does not name it (a moving average,
    `avg = 0.9 * avg + 0.1 * loss`), which keeps what `t` held, graph included."""
    if type(summand) is not cst.BinaryOperation or type(summand.operator) is not cst.Multiply:
        return False
    left, right = dotted(summand.left) == target, dotted(summand.right) == target
    factor = summand.right if left else summand.left
    return left is not right and not any(dotted(n) == target for n in walk(factor))


def modulo_divisor(test: cst.CSTNode) -> cst.BaseExpression | None:
    """The `k` of a gradient-accumulation guard such as `(i + 1) % k == 0` or `step % args.k == k - 1`.
    Calls are not entered: `print("%d" % x)` formatting is not a guard. Nor is a test true on all but one
    iteration in k (`if i % k != 0:`, `if i % k:`): it skips every k-th iteration, it does not wait for k."""
    if _is_modulo(test) or type(test) is cst.Comparison and len(test.comparisons) == 1 and type(
            test.comparisons[0].operator) is cst.NotEqual and (_is_modulo(test.left) or _is_modulo(test.comparisons[0].comparator)):
        return None
    for n in walk(test, prune=lambda n: type(n) is cst.Call):
        if (
            type(n) is cst.BinaryOperation
            and type(n.operator) is cst.Modulo
            and type(n.left) not in (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)
        ):
            return n.right
    return None


def _is_modulo(e: cst.CSTNode) -> bool:
    return type(e) is cst.BinaryOperation and type(e.operator) is cst.Modulo


def equals_integer(test: cst.CSTNode) -> tuple[cst.BaseExpression, int] | None:
    """`(x, n)` of a test `x == n` (either side) with `n` an integer written out; None for anything else."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1 or type(test.comparisons[0].operator) is not cst.Equal:
        return None
    sides = (test.left, test.comparisons[0].comparator)
    return next(((x, int(n.evaluated_value)) for x, n in (sides, sides[::-1]) if type(n) is cst.Integer), None)


def modulo_test(test: cst.CSTNode) -> tuple[cst.BaseExpression, int] | None:
    """`(k, r)` of a window test `x % k == r` (either side) with `r` an integer written out; None for anything else
    (`x % k == r or k == 1` is not one test)."""
    found = equals_integer(test)
    if found is None:
        return None
    mod, rest = found
    if (type(mod) is cst.BinaryOperation and type(mod.operator) is cst.Modulo
            and type(mod.left) not in (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return mod.right, rest
    return None


_ADDITIVE = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)
# Calls whose result is made of their arguments' values (a sum of losses, a stack of them).
COMBINING_CALLS = frozenset({"sum", "torch.sum", "torch.stack", "torch.cat", "torch.mean", "mean", "stack"})
# Calls that return their first argument (a loss) multiplied by a loss scale: apex's `amp.scale_loss`, GradScaler.
LOSS_SCALING_CALLS = frozenset({"scale_loss", "scale"})


def combined_items(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """What a combining call's argument holds: a generator's element, a list's items, or the value itself."""
    if type(value) is cst.GeneratorExp or type(value) is cst.ListComp:
        return [value.elt]
    if type(value) is cst.List or type(value) is cst.Tuple:
        return [el.value for el in value.elements if type(el) is not cst.StarredElement]
    return [value]


# Tensor methods that keep the value they are called on (`loss.mean()`, `loss.sum()`, `loss.to(device)`).
_KEEPING_METHODS = frozenset({"mean", "sum", "to", "cuda", "float", "double", "half", "squeeze", "view", "reshape"})


def summand_names(expr: cst.BaseExpression, graph: Callable[[cst.BaseExpression], bool] | None = None) -> set[str]:
    """Names whose value is a term of `expr` through arithmetic, combining calls and value-keeping methods
    (`a + w * b.mean()` gives a, w, b), not the arguments of other calls (a model's input is not a term).
    With `graph` (does this expression carry a graph?), a factor next to a graph tensor is a weight, not a
    term: `loss_a + w * loss_b` gives loss_a and loss_b, and a divisor is never a term."""
    out: set[str] = set()
    todo = [expr]
    while todo:
        node = todo.pop()
        name = dotted(node)
        if name is not None:
            out.add(name)
        elif type(node) is cst.BinaryOperation and isinstance(node.operator, _ADDITIVE):
            op = node.operator
            if graph is None or type(op) in (cst.Add, cst.Subtract):
                todo += [node.left, node.right]
            elif type(op) is cst.Multiply:
                todo += [side for side, other in ((node.left, node.right), (node.right, node.left)) if not graph(other)]
            elif not graph(node.right):
                todo.append(node.left)
        elif type(node) is cst.UnaryOperation:
            todo.append(node.expression)
        elif type(node) is cst.Subscript:
            todo.append(node.value)
        elif type(node) is cst.Call:
            func = dotted(node.func)
            if func in COMBINING_CALLS:
                for arg in node.args:
                    todo += combined_items(arg.value)
            elif type(node.func) is cst.Attribute and node.func.attr.value in _KEEPING_METHODS:
                todo.append(node.func.value)
            elif type(node.func) is cst.Attribute and node.func.attr.value == "values" and not node.args:
                todo.append(node.func.value)  # `sum(parts.values())`: the dict's values are the terms
            elif type(node.func) is cst.Attribute and node.func.attr.value in LOSS_SCALING_CALLS and node.args:
                todo.append(node.args[0].value)  # `amp.scale_loss(loss, opt)`, `scaler.scale(loss)`: the loss, scaled
        elif type(node) in (cst.List, cst.Tuple):
            todo += combined_items(node)
        elif type(node) is cst.IfExp and not _read_as_number(node):
            todo += [node.body, node.orelse]  # `sum(parts) if isinstance(parts, tuple) else parts`: either arm
    return out


def _read_as_number(node: cst.IfExp) -> bool:
    """`x.item() if learned else x`: one arm reads the other as a number, so the plain arm runs only where `x` is
    one (the author tells the two cases apart)."""
    for cut, plain in ((node.body, node.orelse), (node.orelse, node.body)):
        found = as_detachment(cut)
        if found is not None and dotted(plain) is not None and dotted(found.operand) == dotted(plain):
            return True
    return False


def added_terms(expr: cst.BaseExpression, graph) -> list[cst.BaseExpression]:
    """The names (or items of one, `kl[idx]`) added into `expr`: through `+`, a weight without graph, a divisor
    without graph, a sign, a reduction, a sum; not either side of a difference."""
    return [t for t in term_leaves(expr, graph, differences=False) if type(t) is cst.Name or type(t) is cst.Attribute
            or type(t) is cst.Subscript and type(t.value) in (cst.Name, cst.Attribute)]


def term_leaves(expr: cst.BaseExpression, graph, differences: bool) -> list[cst.BaseExpression]:
    """The expressions summed into `expr`, as far as sums go: through `+` (and `-` when `differences`), a weight or
    a divisor without graph (`graph(e)`: does `e` carry one), a sign, a reduction (`.mean()`), a combining call
    (`sum([...])`, `torch.stack(...)`); each leaf is what none of those is (a name, an item, another call)."""
    node = expr
    while type(node) is cst.Call and type(node.func) is cst.Attribute and not node.args \
            and node.func.attr.value in GRAPH_REDUCTIONS:
        node = node.func.value
    if type(node) is cst.UnaryOperation:
        return term_leaves(node.expression, graph, differences)
    if type(node) is cst.Call and dotted(node.func) in COMBINING_CALLS:
        return [t for arg in node.args for item in combined_items(arg.value) for t in term_leaves(item, graph, differences)]
    if type(node) is not cst.BinaryOperation:
        return [node]
    op = type(node.operator)
    if op is cst.Add or differences and op is cst.Subtract:
        return term_leaves(node.left, graph, differences) + term_leaves(node.right, graph, differences)
    if op is cst.Multiply:
        return [t for side, other in ((node.left, node.right), (node.right, node.left)) if not graph(other)
                for t in term_leaves(side, graph, differences)]
    if op is cst.Divide and not graph(node.right):
        return term_leaves(node.left, graph, differences)
    return []


def computes_numbers(func: str | None) -> bool:
    """A call whose result holds numbers and no graph, whatever it is given: a function of NumPy or `math`, or
    `torch.from_numpy` (a tensor over a NumPy array's values)."""
    return func is not None and (func == "torch.from_numpy" or "." in func and func.split(".", 1)[0] in NUMBER_MODULES)


def cuts_within(expr: cst.BaseExpression) -> list[Detachment]:
    """The outermost detachments anywhere in `expr`."""
    found: list[Detachment] = []

    def visit(node: cst.CSTNode) -> bool:  # True: do not walk into `node`
        det = as_detachment(node)
        if det is not None:
            found.append(det)
        return det is not None

    for _ in walk(expr, prune=visit):
        pass
    return found


def literal_key(sub: cst.Subscript) -> str | None:
    """The string literal a subscript reads (`d["loss"]`), or None."""
    index = sub.slice[0].slice if len(sub.slice) == 1 else None
    return index.value.evaluated_value if type(index) is cst.Index and type(index.value) is cst.SimpleString \
        else None  # type: ignore[return-value]  # a plain string literal evaluates to a str


def read_keys(expr: cst.BaseExpression, name: str) -> set[str] | None:
    """The literal keys through which `expr` reads the container `name` (`d["loss"]`); None where it reads it whole
    or by a key that is not a literal."""
    keys: set[str] = set()
    whole = False

    def visit(n: cst.CSTNode) -> bool:  # True: do not walk into `n`
        nonlocal whole
        if type(n) is cst.Subscript and dotted(n.value) == name:
            key = literal_key(n)
            whole = whole or key is None
            keys.add(key or "")
            return True
        if type(n) in (cst.Name, cst.Attribute) and dotted(n) == name:
            whole = True
            return True
        return False

    for _ in walk(expr, prune=visit):
        pass
    return None if whole or not keys else keys


_CLAMPS = frozenset({"clamp", "clamp_", "clip", "clip_", "clamp_tensor", "clip_grad_value_"})


def clamping_hook(node: cst.CSTNode) -> cst.Call | None:
    """`p.register_hook(lambda g: g.clamp(-c, c))` in `node` (the hook a lambda, or a function defined there): a
    gradient hook that clamps. It runs during the backward, on the gradient as the backward makes it: with a
    GradScaler, the scaled one."""
    return next(clamping_hooks(node), None)


def clamping_hooks(node: cst.CSTNode) -> Iterator[cst.Call]:
    """Each of `clamping_hook`'s registrations in `node`."""
    defs = {n.name.value: n for n in walk(node) if type(n) is cst.FunctionDef}
    for call in walk(node):
        if type(call) is not cst.Call or type(call.func) is not cst.Attribute or call.func.attr.value != "register_hook" \
                or not call.args:
            continue
        hook = call.args[0].value
        body = hook.body if type(hook) is cst.Lambda else defs.get(hook.value) if type(hook) is cst.Name else None
        if body is not None and any(type(c) is cst.Call and (dotted(c.func) or "").rsplit(".", 1)[-1] in _CLAMPS
                                    for c in walk(body)):
            yield call
