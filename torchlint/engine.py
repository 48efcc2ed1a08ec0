"""The one engine every front end calls, on a file's decoded text (the front ends read and decode the bytes).

`lint_source`: `pipeline.analyze` (the prefilter, pruning, one libcst parse, the file model, the rules; syntax and
internal errors as diagnostics), then each finding placed (`source.positions`), its fix's text edits computed when
asked (`pipeline.apply`), and `# noqa` applied (`pipeline.suppress`). `fix_source`: rounds of analyze, choose the
fixes that apply (safe ones, unsafe ones when asked; not suppressed, not overlapping, each checked to parse on its
own, a failing one a TL903), apply them together; until a round changes nothing, at most MAX_FIX_ROUNDS."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import libcst as cst

from torchlint.source import pyast
from torchlint.source.lines import carry_over, split_lines
from torchlint.codes import FIX_ERROR, INTERNAL_ERROR, READ_ERROR, SYNTAX_ERROR  # noqa: F401
from torchlint.diagnostic import Diagnostic, Fix, FixInfo
from torchlint.project import Project
from torchlint.pipeline.analyze import ISSUES_URL, Analysis, analyze, collector_paused
from torchlint.pipeline.apply import LocalEdits, apply_fixes, edits as text_edits
from torchlint.source.decode import Decoded, SourceError, decode  # noqa: F401
from torchlint.source.positions import positions as node_positions
from torchlint.pipeline.prefilter import rules_that_may_fire, select_rules  # noqa: F401
from torchlint.pipeline.suppress import suppressed
from torchlint.rules import Rule, all_rules

MAX_FIX_ROUNDS = 10


def lint_source(
    text: str,
    path: str = "<stdin>",
    rules: Sequence[type[Rule]] | None = None,
    *,
    honour_noqa: bool = True,
    with_edits: bool = False,
    project: Project | None = None,
) -> list[Diagnostic]:
    """All diagnostics of one file's text, sorted by position (with `project`: reading the other files' exports)."""
    rules = list(all_rules()) if rules is None else rules
    # Pruned even with edits: a blanked function keeps its lines, and edits are computed around the fixed node.
    # The collector resumes once the analysis is dropped: its tree and model are freed by their counts, not walked.
    with collector_paused():
        return _diagnostics(analyze(text, path, rules, whole=False, project=project), text, path, honour_noqa,
                            with_edits)


def _diagnostics(
    analysis: Analysis, text: str, path: str, honour_noqa: bool = True, with_edits: bool = False, positions=None
) -> list[Diagnostic]:
    """The analysis's findings and errors as sorted diagnostics (`positions` reused when already computed)."""
    diags = list(analysis.errors)
    if analysis.findings and analysis.module is not None:
        if positions is None:
            positions = node_positions(analysis.module, analysis.source, [f.node for _, f in analysis.findings],
                                       analysis.tops, analysis.statements, analysis.tree)
        local = LocalEdits(analysis.module) if with_edits else None
        for rule, f in analysis.findings:
            rng = positions[f.node]
            info = None
            if f.fix is not None:
                edits: tuple = ()
                if local is not None:
                    found = local.edits(f.fix)
                    edits = found if found is not None else text_edits(
                        analysis.module.code, apply_fixes(analysis.module, [f.fix]).code
                    )
                info = FixInfo(f.fix.applicability, f.fix.message, edits)
            diags.append(
                Diagnostic(
                    path, rng.start.line, rng.start.column + 1, rng.end.line, rng.end.column + 1,
                    rule.code, " ".join(f.message.split()), info,  # one line, even when it quotes a multi-line call
                )
            )
    if honour_noqa and diags:
        lines = split_lines(text)
        diags = [d for d in diags if not suppressed(lines, d)]
    return sorted(diags, key=Diagnostic.sort_key)


@dataclass(frozen=True)
class FixResult:
    text: str  # the fixed source (unchanged when nothing applied or the file did not parse)
    applied: int  # number of fixes applied over all rounds
    remaining: list[Diagnostic]  # diagnostics left after fixing
    failed: list[Diagnostic]  # fixes whose result did not parse (discarded)


def fix_source(
    text: str,
    path: str = "<stdin>",
    rules: Sequence[type[Rule]] | None = None,
    *,
    unsafe: bool = False,
    project: Project | None = None,
) -> FixResult:
    """Apply fixes round by round until none applies (at most MAX_FIX_ROUNDS rounds)."""
    rules = list(all_rules()) if rules is None else rules
    applied = 0
    failed: list[Diagnostic] = []
    bad_fixes: set[tuple[str, str]] = set()
    analysis: Analysis | None = None
    positions = None
    for _ in range(MAX_FIX_ROUNDS):
        analysis, positions = analyze(text, path, rules, project=project), None
        if analysis.module is None or not analysis.findings:
            break
        lines = split_lines(text)
        positions = node_positions(
            analysis.module, text,
            [f.node for _, f in analysis.findings] + [old for _, f in analysis.findings if f.fix for old, _ in f.fix.changes],
            analysis.tops, analysis.statements, analysis.tree,
        )
        chosen: list[Fix] = []
        taken: list[tuple[tuple[int, int], tuple[int, int]]] = []
        # Each fix is applied and checked on the top-level statements it touches (a statement parses the same
        # alone as in its module), not on the whole module: a 20,000-line file costs a whole rewrite per finding.
        local = LocalEdits(analysis.module)
        for rule, f in analysis.findings:
            if f.fix is None or (f.fix.applicability == "unsafe" and not unsafe):
                continue
            start = positions[f.node].start
            probe = Diagnostic(path, start.line, start.column + 1, start.line, start.column + 1, rule.code, "")
            if suppressed(lines, probe) or (rule.code, f.message) in bad_fixes:
                continue
            spans = [positions[old] for old, _ in f.fix.changes]
            ranges = [((r.start.line, r.start.column), (r.end.line, r.end.column)) for r in spans]
            if any(s < te and ts < e for s, e in ranges for ts, te in taken):
                continue  # overlaps a fix chosen this round: it gets its turn in the next round
            # Check each fix on its own: one that yields invalid code is dropped and reported.
            span = local.region(f.fix)
            candidate = (apply_fixes(analysis.module, [f.fix]).code if span is None
                         else local.after(span[0], span[1], [f.fix]))
            try:
                cst.parse_module(candidate)
                pyast.parse(candidate, path)
            except Exception:
                bad_fixes.add((rule.code, f.message))
                failed.append(Diagnostic(path, start.line, start.column + 1, start.line, start.column + 1, FIX_ERROR,
                                         f"fix for {rule.code} produced invalid code and was discarded; please report it at {ISSUES_URL}"))
                continue
            chosen.append(f.fix)
            taken.extend(ranges)
        if not chosen:
            break
        new_text = local.apply(text, chosen) if "\f" not in text else None
        if new_text is None:
            new_text = apply_fixes(analysis.module, chosen).code
        if "\f" in text:
            # libcst writes a form feed before a statement back as nothing: the lines the fixes did not change are
            # taken from the text as read (only then: generating the unchanged module's code costs a tenth of a round).
            new_text = carry_over(text, analysis.module.code, new_text)
        if new_text == text:
            break
        text, analysis = new_text, None
        applied += len(chosen)
    # The last analysis is of the final text unless the round limit stopped right after a rewrite.
    remaining = (lint_source(text, path, rules, project=project) if analysis is None
                 else _diagnostics(analysis, text, path, positions=positions))
    return FixResult(text, applied, remaining, failed)
