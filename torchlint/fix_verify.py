"""`torchlint --fix --verify SCRIPT`: each fix, proven on the user's own script before it is written.

For every fix `--fix` would apply (safe ones; unsafe ones too with `--unsafe-fixes`), the script with only that fix
applied is written beside the original (a hidden temporary file, removed afterwards, so that the script's own
imports resolve), and both run under the recorder (torchlint.verify.runner) with the same seeds for N optimizer
steps:
- a safe fix must give the same gradients and parameters at every step; otherwise it is withdrawn (TL903) and not
  written. What it saves is reported: autograd buffers, their bytes and graph nodes alive after the last step, and
  the peak CUDA memory on CUDA.
- an unsafe fix changes training on purpose: the first step that differs is reported, and the fixed script runs
  under the runtime monitor, which must no longer see the rule's sign (the property the rule promises).
The verified fixes are then written together, as `--fix` writes them.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from torchlint.codes import FIX_ERROR
from torchlint.diagnostic import Diagnostic
from torchlint.files import VERIFY_CANDIDATE


@dataclass(frozen=True)
class Verdict:
    code: str
    line: int
    column: int
    applicability: str
    kept: bool
    detail: str


def verify_fixes(path: Path, rules, unsafe: bool, steps: int, device: str, project=None,
                 runs: list[dict] | None = None, data: bytes | None = None,
                 argv: Sequence[str] = ()) -> tuple[list[Verdict], str | None]:
    """The verdict on each fix of `path` (its bytes `data`, read now when not given), and the text with the kept
    fixes applied (None when nothing is kept). The script runs with `argv` as its arguments. With `runs`, each
    fix's two records are appended to it (for `--report`)."""
    import libcst as cst

    from torchlint.engine import decode
    from torchlint.pipeline.analyze import analyze
    from torchlint.pipeline.apply import apply_fixes
    from torchlint.source.positions import positions
    from torchlint.verify.monitor import run_many
    from torchlint.verify.runner import run_scripts

    text = decode(path.read_bytes() if data is None else data).text
    analysis = analyze(text, str(path), rules, project=project)
    if analysis.module is None:
        return [], None
    chosen = [(rule, f) for rule, f in analysis.findings
              if f.fix is not None and (f.fix.applicability == "safe" or unsafe)]
    if not chosen:
        return [], None
    where = positions(analysis.module, analysis.source, [f.node for _, f in chosen], analysis.tops,
                      analysis.statements, analysis.tree)
    _remove_leftovers(path)
    temps: list[Path] = []
    try:
        for i, (_, f) in enumerate(chosen):
            assert f.fix is not None  # chosen: findings with a fix
            candidate = apply_fixes(analysis.module, [f.fix]).code
            cst.parse_module(candidate)
            temp = path.with_name(f".{path.stem}{VERIFY_CANDIDATE}{os.getpid()}-{i}.py")
            temp.write_text(candidate, encoding="utf-8")
            temps.append(temp)
        records = run_scripts([path, *temps], device, count_graph=True, max_steps=steps, argv=argv)
        original, candidates = records[0], records[1:]
        unsafe_temps = [t for t, (_, f) in zip(temps, chosen) if f.fix is not None and f.fix.applicability == "unsafe"]
        monitored = (dict(zip(map(str, unsafe_temps), run_many(unsafe_temps, steps, device, argv)))
                     if unsafe_temps and original["steps"] else {})
    finally:
        for temp in temps:
            temp.unlink(missing_ok=True)
    verdicts, kept = [], []
    for (rule, f), temp, record in zip(chosen, temps, candidates):
        assert f.fix is not None  # chosen: findings with a fix
        pos = where[f.node].start
        kept_it, detail = _judge(rule.code, pos.line, f.fix.applicability, original, record, monitored.get(str(temp)))
        verdicts.append(Verdict(rule.code, pos.line, pos.column + 1, f.fix.applicability, kept_it, detail))
        if kept_it:
            kept.append(f.fix)
        if runs is not None:
            runs.append({"title": f"{path.name}:{pos.line}:{pos.column + 1}: {rule.code} {f.fix.message}",
                         "original": original, "fixed": record, "verdict": ("kept: " if kept_it else "") + detail})
    if not kept:
        return verdicts, None
    new = apply_fixes(analysis.module, kept).code
    return verdicts, new if new != text else None


def _remove_leftovers(path: Path) -> None:
    """The candidates of a run that was killed (`kill -9` leaves them): those of a process no longer alive."""
    for stale in path.parent.glob(f".{glob.escape(path.stem)}{VERIFY_CANDIDATE}*-*.py"):
        pid = stale.name[len(f".{path.stem}{VERIFY_CANDIDATE}"):].split("-")[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            stale.unlink(missing_ok=True)
        except OSError:
            pass  # alive, another user's: a run in progress


def _judge(code: str, line: int, applicability: str, original: dict, record: dict, monitored) -> tuple[bool, str]:
    """Is the fix kept, and why: a safe one must leave every gradient and parameter as they were; an unsafe one
    must keep what its rule promises on the fixed run."""
    from torchlint.verify.compare import compare_records

    if not original["steps"]:  # nothing to compare: a fix proven on no step is not proven
        error = original["error"]
        if error is None:
            return False, "not verified: the script took no optimizer step; the fix is not written"
        hint = "; pass the script's arguments with --verify-args" if error.startswith("SystemExit") else ""
        return False, f"not verified: the script failed before its first optimizer step ({error}{hint}); " \
                      "the fix is not written"
    mismatch = compare_records(record, original)
    if applicability == "safe":
        if mismatch is not None or record["error"]:
            return False, f"withdrawn: on this script it changes training ({mismatch or record['error']})"
        saved = _last(original, "saved"), _last(record, "saved")
        size = _last(original, "saved_bytes"), _last(record, "saved_bytes")
        nodes = _last(original, "graph_nodes"), _last(record, "graph_nodes")
        saves = [f"{a} -> {b} {what}" for (a, b), what in ((saved, "autograd buffers"), (nodes, "graph nodes"))
                 if b < a]
        if size[1] < size[0]:
            saves.append(f"{_size(size[0])} -> {_size(size[1])} saved for backward")
        if original.get("peak_cuda") and record.get("peak_cuda") and record["peak_cuda"] < original["peak_cuda"]:
            saves.append(f"peak CUDA memory {_size(original['peak_cuda'])} -> {_size(record['peak_cuda'])}")
        return True, f"identical gradients and parameters at all {len(record['steps'])} steps" + (
            f"; alive after the last step: {', '.join(saves)}" if saves else "")
    if record["error"]:
        return False, f"withdrawn: the fixed script fails ({record['error']})"
    from torchlint.rules import rule_by_code

    rule = rule_by_code(code)  # an unsafe fix's script ran under the monitor too
    promise = rule.promise_kept(line, original, record, monitored) if rule is not None else None
    if promise is None:
        return False, f"withdrawn: the run of the fixed script does not keep what {code} promises"
    differs = (f"training differs from optimizer step {mismatch.step + 1} on ({mismatch.what}), as intended"
               if mismatch is not None else "training is unchanged in the steps run")
    return True, f"{differs}; {promise}"


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:g} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _last(record: dict, metric: str) -> int:
    return record["steps"][-1][metric] if record["steps"] else 0


def diagnostics(path: str, verdicts: list[Verdict]) -> list[Diagnostic]:
    """Verdicts as diagnostics: a withdrawn fix is a TL903 at its finding; a kept one is said on stderr."""
    return [Diagnostic(path, v.line, v.column, v.line, v.column, FIX_ERROR,
                       f"{v.applicability} fix for {v.code} {v.detail}") for v in verdicts if not v.kept]
