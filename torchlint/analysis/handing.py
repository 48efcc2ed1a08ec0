"""Whether a use of kept values other than showing them may back-propagate them later: handed, or a value
computed from them, to a helper of the file that back-propagates, or to a call whose use of them is not known
(TL007 stays silent then: detaching them would break that backward)."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from torchlint.analysis.events import EventKind
from torchlint.analysis.exprs import dotted, names_in, positional_params
from torchlint.analysis.model import FileModel
from torchlint.analysis.scopes import Scope
from torchlint.analysis.semantics import DISPLAY_METHOD, NUMERIC_MODULES, READING_CALLS


_HELPER_DEPTH = 3


def handed_on(model: FileModel, scope: Scope, total: str) -> bool:
    """A use of the kept values other than showing them may back-propagate them later: the container, an item
    popped from it or a value computed from it is handed to a helper of the file that back-propagates (a pipeline
    schedule's queue of micro-batch outputs, each popped into `backward_step(...)`), or to a call whose use of it
    is not known. Detaching them then breaks that backward, and the report is false."""
    if total.startswith("self."):
        scopes = [s for s in model.scopes if s.class_name == scope.class_name] if scope.class_name else [scope]
    else:
        scopes = [scope]
    return any(_may_backpropagate(model, s, {total}, 0) for s in scopes)


def _may_backpropagate(model: FileModel, scope: Scope, names: set[str], depth: int) -> bool:
    """Some use of `names` in `scope`, or of a value computed from them, may back-propagate them."""
    derived = _computed_from(scope, names)
    if derived & scope.backpropagated():
        return True
    for stmt, call in _calls_by_statement(scope):
        if type(call) is not cst.Call:
            continue
        handed = [a for a in call.args if names_in(a.value) & derived and _derived_there(scope, stmt, names_in(
                  a.value) & derived, names, derived)
                  and not (depth == 0 and _detached_before(model, scope, stmt, names_in(a.value) & derived))]
        if not handed or _reads(call, derived):
            continue
        func = dotted(call.func)
        callee = model.resolve(scope, func) if func is not None else None
        if callee is None or depth >= _HELPER_DEPTH:
            return True  # a call the analysis cannot follow: what it does with the values is not known
        if any(e.kind is EventKind.BACKWARD for e in callee.events):
            return True  # a helper that back-propagates: the values are kept for it
        params = _parameters_given(callee, call, handed)
        if params is None or _may_backpropagate(model, callee, params, depth + 1):
            return True
    return False


def _calls_by_statement(scope: Scope) -> Iterator[tuple[cst.CSTNode | None, cst.CSTNode]]:
    """Every node of the function, with the simple statement line holding it (None outside one)."""
    todo: list[tuple[cst.CSTNode | None, cst.CSTNode]] = [(None, scope.node)]
    while todo:
        stmt, node = todo.pop()
        yield stmt, node
        line = node if type(node) is cst.SimpleStatementLine else stmt
        todo.extend((line, child) for child in reversed(node.children))


def _detached_before(model: FileModel, scope: Scope, stmt: cst.CSTNode | None, names: set[str]) -> bool:
    """Each of `names` is a running total rebound to a value without a graph before `stmt` (`total =
    total.detach().cpu()` after the batch loop, then `animator.add(total)`): the call gets no kept graph. Only
    rebindings that the accumulations never see count: the total's initialisation reaches them too."""
    # A name the scope assigns is unbound on a path from its entry (a local, or a global of the module body),
    # unless it is a parameter or an attribute.
    if stmt is None:
        return False
    for name in names:
        sums = [a for a in scope.assignments(name) if a.accumulates and a.kind is EventKind.ASSIGN]
        found = scope.reaching_statement(name, stmt)
        if not sums or found is None or not found[0] or found[1] and (name in scope.params or "." in name):
            return False
        before = {id(d) for a in sums for d in scope.reaching(name, a)[0]}
        if any(id(d) in before or not model.kinds.of_def(d, scope).graph_free for d in found[0]):
            return False
    return True


def _derived_there(scope: Scope, stmt: cst.CSTNode | None, used: set[str], names: set[str], derived: set[str]) -> bool:
    """One of `used` holds a value computed from the kept values where `stmt` reads it: a kept name itself, or a
    name one of whose definitions reaching `stmt` reads them (`for v in totals.values()` after the loop does not
    make the loop's own `v` a kept value)."""
    if used & names or stmt is None:
        return True
    for name in used:
        found = scope.reaching_statement(name, stmt)
        if found is None or found[1] and (name in scope.params or "." in name):
            return True  # not known where it comes from
        if any(d.value is None or names_in(d.value) & derived for d in found[0]):
            return True
    return False


def _computed_from(scope: Scope, names: set[str]) -> set[str]:
    """`names` and every name of the scope assigned a value that reads one of them (`out = outputs.pop(0)`, a
    loop variable over them, another list they are appended to)."""
    out = set(names)
    assigns = [(e.target, e.value) for e in scope.events
               if e.scope is scope.node and e.kind in (EventKind.ASSIGN, EventKind.APPEND) and e.target
               and e.value is not None]
    grown = True
    while grown:
        grown = False
        for target, value in assigns:
            if target not in out and names_in(value) & out:
                out.add(target)
                grown = True
    return out


def _reads(call: cst.Call, derived: set[str]) -> bool:
    """The call reads what it is given and back-propagates nothing: a reader above, or a method of the kept values
    themselves (`outputs.append(...)`, `total.add_(...)`; their `.backward()` is a backward the scope already
    counts)."""
    func = dotted(call.func) or ""
    if func.startswith("torch.autograd"):
        return False
    if type(call.func) is cst.Attribute and dotted(call.func.value) in derived:
        return True
    strings = (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)
    if type(call.func) is cst.Attribute and isinstance(call.func.value, strings):
        return True  # `"{:.3f}".format(total)`, `" ".join(...)`: a string's method makes a string
    parts = func.split(".")
    return (parts[-1] in READING_CALLS or (len(parts) > 1 and parts[0] in NUMERIC_MODULES)
            or DISPLAY_METHOD.fullmatch(parts[-1]) is not None)


def _parameters_given(callee: Scope, call: cst.Call, handed: list[cst.Arg]) -> set[str] | None:
    """The parameters of the helper that receive the arguments `handed`; None when one is passed in a way not
    followed (`*args`, `**kwargs`, more positional arguments than parameters)."""
    names = positional_params(callee.node)
    if type(call.func) is cst.Attribute and (dotted(call.func) or "").startswith("self."):
        names = names[1:]
    positional = [a for a in call.args if a.keyword is None]
    out: set[str] = set()
    for a in handed:
        if a.star:
            return None
        if a.keyword is not None:
            out.add(a.keyword.value)
            continue
        index = positional.index(a)
        if index >= len(names):
            return None
        out.add(names[index])
    return out
