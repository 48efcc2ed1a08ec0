"""Stage 3: parse once with libcst, build the file's model, run the rules on it; syntax and internal errors
become diagnostics, never exceptions."""

from __future__ import annotations

import ast
import gc
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Iterator, Sequence

import libcst as cst

from torchlint.source import pyast
from torchlint.source.cstfast import parse_read_only
from torchlint.source.ipython import mask_ipython_lines
from torchlint.analysis import FileModel
from torchlint.analysis.expected import expected_regions
from torchlint.analysis.liveness import never_run
from torchlint.analysis.foreign import ProjectLookup
from torchlint.project import Project, ProjectView
from torchlint.project_callers import callers_text
from torchlint.codes import INTERNAL_ERROR, SYNTAX_ERROR
from torchlint.diagnostic import Diagnostic
from torchlint.pipeline.prefilter import rules_that_may_fire
from torchlint.analysis.prescan import other_framework
from torchlint.analysis.prune import prune_with_tree
from torchlint.rules import Finding, Rule

ISSUES_URL = "https://github.com/torchlint/torchlint/issues"


@dataclass
class Analysis:
    module: cst.Module | None
    findings: list[tuple[type[Rule], Finding]]
    errors: list[Diagnostic]
    source: str = ""  # what was parsed: the text, or the text with irrelevant functions blanked (same lines)
    tops: dict = field(default_factory=dict)  # FileModel.top_of
    statements: dict = field(default_factory=dict)  # FileModel.statement_of
    tree: ast.Module | None = None  # the `ast` of `source` (pruning's, or CPython's check of the nesting), if parsed


def _syntax_error(text: str, path: str, exc: Exception) -> Diagnostic:
    try:
        pyast.parse(text, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        return _refused(path, err)
    line = getattr(exc, "raw_line", 1) or 1
    col = (getattr(exc, "raw_column", 0) or 0) + 1
    first = str(getattr(exc, "message", exc)).splitlines()[0] if str(exc) else type(exc).__name__
    return Diagnostic(path, line, col, line, col, SYNTAX_ERROR, f"cannot parse with libcst ({first}); file not checked")


def _refused(path: str, err: Exception) -> Diagnostic:
    """CPython's parser refusing the text, as a TL901."""
    if isinstance(err, SyntaxError):
        line, col = err.lineno or 1, err.offset or 1
        return Diagnostic(path, line, col, line, col, SYNTAX_ERROR, f"syntax error: {err.msg}; file not checked")
    if isinstance(err, (RecursionError, MemoryError)):  # CPython's parser gave up on the depth (MemoryError: no text)
        return Diagnostic(path, 1, 1, 1, 1, SYNTAX_ERROR,
                          f"syntax error: nested too deeply for Python ({err or type(err).__name__}); file not checked")
    return Diagnostic(path, 1, 1, 1, 1, SYNTAX_ERROR, f"cannot parse: {err}; file not checked")


# What CPython's tokenizer and parser say of nesting deeper than they take (a RecursionError says it too). libcst
# parses such a file (or recurses until Python's own limit stops the model or the positions): it is no Python.
_TOO_DEEP = ("too many nested parentheses", "too many levels of indentation", "too complex")


def _too_deep(source: str, path: str) -> tuple[ast.Module | None, Diagnostic | None]:
    """The text's `ast` (None where CPython refuses it for another reason: libcst's verdict decides, as before, so
    that syntax newer than this Python still gets checked), or the TL901 of nesting CPython refuses."""
    try:
        return pyast.parse(source.removeprefix("\ufeff")), None  # CPython refuses a BOM in a str
    except (RecursionError, MemoryError) as err:
        return None, _refused(path, err)
    except SyntaxError as err:
        return None, (_refused(path, err) if any(m in str(err.msg).lower() for m in _TOO_DEEP) else None)
    except ValueError:
        return None, None


def analyze(
    text: str, path: str, rules: Sequence[type[Rule]], whole: bool = True, project: Project | None = None
) -> Analysis:
    """Parse and run the rules. With `whole` False (reporting only), functions that cannot matter are blanked
    out before parsing (torchlint.analysis.prune); fixing always parses the whole text, since it rewrites it.

    With a `project`, calls into its other files are answered by their exports (torchlint.project):
    the prefilter reads the file's text together with the events of the callees it reaches."""
    view = project.view(path, text) if project is not None else None
    # A helper file with no backward whose callers back-propagate through its functions (`project_callers`).
    called = callers_text(project.callers_index, path, text) if view is None and project is not None \
        and not project.cached_only else ""
    extra = view.text if view is not None else called
    firing = rules_that_may_fire(f"{text}\n{extra}" if extra else text, rules)
    if not firing or other_framework(text):
        return Analysis(None, [], [])  # nothing to check, or not PyTorch code (Paddle, TensorFlow ...)
    with collector_paused():
        lookup = view if view is not None or project is None else project.classes_view(path, text, bool(called))
        return _analyze(text, path, firing, whole, view, lookup, keep=bool(called))


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector paused while one file is analysed: a libcst tree and the model are hundreds of
    thousands of young objects, and the collector would walk them again and again (a third of the time) to find
    cycles there are few of; it resumes, and collects as usual, once the file is done."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _analyze(text: str, path: str, firing: Sequence[type[Rule]], whole: bool, view: ProjectView | None,
             lookup: ProjectLookup | None = None, keep: bool = False) -> Analysis:
    # A call to another file's function counts as the text of that function's events (ProjectView.stand_ins);
    # `keep`: a helper file whose callers back-propagate through it keeps every function (none holds a backward).
    source, tree = (text, None) if whole or keep else prune_with_tree(
        text, {c for rule in firing for c in rule.scope_conditions()}, view.stand_ins if view is not None else None
    )
    if tree is None:
        # CPython's parser first (a fiftieth of the time libcst takes): nesting it refuses is a syntax error, not a
        # crash of libcst, the model or the positions; and the positions reuse its tree.
        tree, refused = _too_deep(source, path)
        if refused is not None:
            return Analysis(None, [], [refused])
    try:
        # Reporting only reads the tree: libcst's per-node validation is skipped (torchlint.source.cstfast).
        module = cst.parse_module(source) if whole else parse_read_only(source)
    except Exception as exc:  # libcst raises ParserSyntaxError, and RecursionError on absurd nesting
        refused = _syntax_error(text, path, exc)
        exported = mask_ipython_lines(source) if not refused.message.startswith("syntax error: nested") else None
        return _as_notebook_export(exported, refused, path, firing, whole, view, lookup, keep) if exported \
            else Analysis(None, [], [refused])
    if source.endswith("\r") and not module.has_trailing_newline:
        # libcst sees a final line break only in `\n`: without this, the code it writes back drops a final `\r`
        module = module.with_changes(has_trailing_newline=True)
    whole_text, text = text, source
    findings: list[tuple[type[Rule], Finding]] = []
    errors: list[Diagnostic] = []
    try:
        model = FileModel(module, text, lookup, whole_text)
    except RecursionError:
        return Analysis(None, [], [Diagnostic(path, 1, 1, 1, 1, INTERNAL_ERROR, "nesting too deep to analyse; file not checked")])
    except Exception as exc:  # a bug of ours must not stop the run
        return Analysis(None, [], [internal_error(path, "the training-loop model", exc)])
    seen: set[tuple[str, int]] = set()
    for rule in firing:
        try:
            for finding in rule().check(model):
                key = (rule.code, id(finding.node))
                if key not in seen:
                    seen.add(key)
                    findings.append((rule, finding))
        except Exception as exc:
            errors.append(internal_error(path, rule.code, exc))
    model.release()
    if findings:
        # A test that checks PyTorch warns or raises misbehaves on purpose (analysis.expected).
        expected = expected_regions(module, text)
        if path.endswith(".ipynb"):
            expected |= never_run(module, whole_text)  # a definition no cell reaches never runs (analysis.liveness)
        findings = [(rule, f) for rule, f in findings if id(f.node) not in expected]
    return Analysis(module, findings, errors, source, model.top_of, model.statement_of, tree)


def _as_notebook_export(exported: tuple[str, list[int]], refused: Diagnostic, path: str, firing: Sequence[type[Rule]],
                        whole: bool, view: ProjectView | None, lookup: ProjectLookup | None, keep: bool) -> Analysis:
    """A `.py` exported from a notebook that keeps its IPython lines (`!pip install ...`, `%matplotlib inline`):
    with those lines read as `pass` (line for line) it may parse, and is then checked like the notebook it comes
    from; nothing is fixed in it (the file is not Python), and a TL901 notice says so. Else the parser's refusal."""
    masked, lines = exported
    try:
        pyast.parse(masked, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Analysis(None, [], [refused])
    analysis = _analyze(masked, path, firing, whole, view, lookup, keep)
    if analysis.module is None:
        return Analysis(None, [], [refused])
    shown = ", ".join(map(str, lines[:3])) + (", ..." if len(lines) > 3 else "")
    notice = Diagnostic(path, lines[0], 1, lines[0], 1, SYNTAX_ERROR, (
        f"IPython lines (line{'s' if len(lines) > 1 else ''} {shown}) are not Python: the file was checked with them "
        f"read as no-ops, as the notebook it comes from runs, and no fix is applied to it"))
    analysis.findings = [(rule, replace(f, fix=None)) for rule, f in analysis.findings]
    analysis.errors = [notice, *analysis.errors]
    return analysis


def internal_error(path: str, where: str, exc: Exception) -> Diagnostic:
    return Diagnostic(
        path, 1, 1, 1, 1, INTERNAL_ERROR,
        f"internal error in {where} ({type(exc).__name__}: {exc}); please report it at {ISSUES_URL} with this file",
    )
