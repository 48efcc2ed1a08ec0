"""torchlint: a static analyzer for PyTorch training loops."""

__version__ = "0.1.0"


def lint_source(text: str, path: str = "<stdin>"):
    """Diagnostics of one file's text with every rule enabled (see torchlint.engine for options)."""
    from torchlint.engine import lint_source as _lint

    return _lint(text, path)


def fix_source(text: str, path: str = "<stdin>", *, unsafe: bool = False):
    """The text with fixes applied to a fixpoint (see torchlint.engine.FixResult)."""
    from torchlint.engine import fix_source as _fix

    return _fix(text, path, unsafe=unsafe)
