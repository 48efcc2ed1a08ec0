"""torchlint: a static analyzer for PyTorch training loops.

The Python API is `lint_source` and `fix_source` (documented, with examples, in the README's "Python API").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from torchlint.diagnostic import Diagnostic
    from torchlint.engine import FixResult

__version__ = "0.1.0"


def lint_source(text: str, path: str = "<stdin>", *, select: Iterable[str] | None = None) -> list[Diagnostic]:
    """The findings in one file's text, sorted by position. `path` is only reported back (and decides nothing
    else); `select` limits the rules to these codes (default: all). `# noqa` comments are honoured."""
    from torchlint.engine import lint_source as _lint, select_rules

    return _lint(text, path, select_rules(select) if select is not None else None)


def fix_source(
    text: str, path: str = "<stdin>", *, unsafe: bool = False, select: Iterable[str] | None = None
) -> FixResult:
    """The text with fixes applied round by round until none applies: safe fixes, and unsafe ones too with
    `unsafe=True`. Returns `FixResult(text, applied, remaining, failed)`: the new text, how many fixes were
    applied, the findings left, and fixes discarded because they did not produce valid code (TL903)."""
    from torchlint.engine import fix_source as _fix, select_rules

    return _fix(text, path, select_rules(select) if select is not None else None, unsafe=unsafe)
