"""The rule registry: every module `tlNNN_name.py` of this package holds one rule, code TLNNN.

Adding a rule is adding its module (with its tests and fixtures): the registry finds it by its file name. The codes
are known from the file names alone (`rule_codes()`), without importing the rules and libcst, so that a warm run
which only reads the cache, and the configuration's checks, stay cheap; `all_rules()` imports them.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from torchlint.rules.base import Finding, Rule

_RULE_MODULE = re.compile(r"tl(\d{3})_\w+")
_extra: list[type[Rule]] = []  # rules registered at run time (`registered`), after the package's own


@lru_cache(maxsize=None)
def _modules() -> tuple[tuple[str, str], ...]:
    """(code, module name) of the package's rule modules, in code order."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        m = _RULE_MODULE.fullmatch(info.name)
        if m is not None:
            found.append((f"TL{m.group(1)}", info.name))
    return tuple(sorted(found))


def rule_codes() -> tuple[str, ...]:
    """The code of every rule, in code order, without importing any rule."""
    return tuple(code for code, _ in _modules()) + tuple(r.code for r in _extra)


def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class, in code order: the package's, then those `registered`."""
    return _package_rules() + tuple(_extra)


@lru_cache(maxsize=None)
def _package_rules() -> tuple[type[Rule], ...]:
    """Each rule module's one subclass of `Rule`, whose code its file name gives."""
    from torchlint.rules.base import Rule

    out = []
    for code, name in _modules():
        module = importlib.import_module(f"{__name__}.{name}")
        found = [v for v in vars(module).values()
                 if isinstance(v, type) and issubclass(v, Rule) and v.__module__ == module.__name__]
        if len(found) != 1 or found[0].code != code:
            raise ImportError(f"{module.__name__} must define exactly one Rule, with code {code}")
        out.append(found[0])
    return tuple(out)


def rule_by_code(code: str) -> type[Rule] | None:
    return next((r for r in all_rules() if r.code == code), None)


@contextmanager
def registered(rule: type[Rule]) -> Iterator[type[Rule]]:
    """`rule` joins the registry while the block runs (tests, and plugins that add rules of their own)."""
    _extra.append(rule)
    try:
        yield rule
    finally:
        _extra.remove(rule)


def attribute(record: dict) -> dict:
    """The record with each observation's rule: `code`, the rule whose sign it is, and `also`, the rules whose bug
    the same sign may show."""
    from torchlint.verify.signs import Sign

    rules = all_rules()
    for o in record.get("observations", ()):
        sign = Sign(o["sign"])
        owner = next((r.code for r in rules if sign in r.runtime_signs), None)
        o["code"] = owner
        o["also"] = [r.code for r in rules if sign in r.runtime_also]
    return record


def __getattr__(name: str) -> Any:
    # `from torchlint.rules import ALL_RULES, Rule` keeps working, and imports the rules only when asked.
    if name == "ALL_RULES":
        return all_rules()
    if name == "RULES_BY_CODE":
        return {r.code: r for r in all_rules()}
    if name in ("Finding", "Rule"):
        from torchlint.rules import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ALL_RULES", "RULES_BY_CODE", "Finding", "Rule", "all_rules", "attribute", "registered", "rule_by_code", "rule_codes"]
