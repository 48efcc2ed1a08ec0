"""A script's command-line options as Python's argparse defines them: `args = parser.parse_args()` at the top of
the module binds `args`, and `parser.add_argument('--gradient_steps', default=1, type=int)` gives
`args.gradient_steps` its value when the option is not passed. Read from the module's text alone; an option
whose value the script itself changes (`args.gradient_steps = 4`) has no known default."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.analysis.exprs import dotted
from torchlint.analysis.semantics import ARGPARSE_ADD, ARGPARSE_PARSE
from torchlint.source.walk import walk


class Options:
    """The defaults of the options a module's `parse_args()` result holds, by the name it is bound to."""

    def __init__(self, module: cst.Module, text: str) -> None:
        self._text = text
        bound = [_parsed_into(s) for s in _top_statements(module)]
        names = [n for n in bound if n is not None]
        # One binding only: two parsers (or a rebinding) make `args` mean more than one thing.
        self.holder = names[0] if len(names) == 1 else None
        self._defaults: dict[str, cst.BaseExpression] = {}
        if self.holder is None:
            return
        seen: set[str] = set()
        for node in walk(module):
            if type(node) is not cst.Call or type(node.func) is not cst.Attribute:
                continue
            if node.func.attr.value != ARGPARSE_ADD:
                continue
            dest, default = _option(node)
            if dest is None:
                continue
            if dest in seen:  # defined twice (two parsers, a sub-command): no one default
                self._defaults.pop(dest, None)
                continue
            seen.add(dest)
            if default is not None:
                self._defaults[dest] = default

    def default(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """The default of `args.name` when `args` is the module's parsed options and the script never assigns
        `args.name` itself."""
        name = dotted(expr)
        if self.holder is None or name is None or name.count(".") != 1:
            return None
        holder, attr = name.split(".")
        if holder != self.holder or attr not in self._defaults:
            return None
        if re.search(rf"\b{re.escape(name)}\s*(?:[-+*/%|&^]|//|\*\*|<<|>>)?=(?!=)|setattr\(\s*{holder}\b", self._text):
            return None
        return self._defaults[attr]


def _top_statements(module: cst.Module):
    """The module's own statements, those under `if __name__ == "__main__":` included."""
    for stmt in module.body:
        if type(stmt) is cst.If:
            yield from (s for s in stmt.body.body)
        else:
            yield stmt


def _parsed_into(stmt: cst.CSTNode) -> str | None:
    """`args = parser.parse_args()`: the name bound to the parsed options."""
    if type(stmt) is not cst.SimpleStatementLine:
        return None
    for small in stmt.body:
        if type(small) is not cst.Assign or len(small.targets) != 1 or type(small.targets[0].target) is not cst.Name:
            continue
        value = small.value
        if type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in ARGPARSE_PARSE:
            return small.targets[0].target.value
    return None


def _option(call: cst.Call) -> tuple[str | None, cst.BaseExpression | None]:
    """The attribute an `add_argument` call sets (`dest=`, else the first long option, else the positional
    name, with `-` read as `_`) and its `default=`, if given."""
    flags: list[str] = []
    dest: str | None = None
    default: cst.BaseExpression | None = None
    for arg in call.args:
        if arg.keyword is None:
            if type(arg.value) is not cst.SimpleString or arg.star:
                return None, None
            flags.append(arg.value.evaluated_value if isinstance(arg.value.evaluated_value, str) else "")
        elif arg.keyword.value == "dest" and type(arg.value) is cst.SimpleString:
            dest = str(arg.value.evaluated_value)
        elif arg.keyword.value == "default":
            default = arg.value
        elif arg.keyword.value == "action" and type(arg.value) is cst.SimpleString and \
                arg.value.evaluated_value in ("append", "count", "extend"):
            return None, None  # the value grows with each use of the option: not the default as written
    if dest is None:
        longs = [f for f in flags if f.startswith("--")]
        plain = [f for f in flags if not f.startswith("-")]
        dest = longs[0][2:] if longs else plain[0] if plain else None
    return (dest.replace("-", "_") if dest else None), default
