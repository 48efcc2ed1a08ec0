"""`torchlint run SCRIPT [ARGS...]`: the script's static findings, checked on a real run of it.

The script runs in a subprocess under the runtime monitor (torchlint.verify.monitor) for N optimizer steps, as
`python SCRIPT ARGS` would run it; torchlint never writes it. Each static finding of the script's file is marked
"confirmed" (the run showed it: the same rule, at that line or, for a helper, on the stack) or "not observed" (in
the steps run); what only the run saw is added as "runtime only", at the script's innermost frame.

Exit codes: 0 nothing found, 1 findings, 2 usage error, a script that fails before its first optimizer step (its
traceback is shown), or a run past the time limit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from torchlint.diagnostic import Diagnostic

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def main(argv: Sequence[str]) -> int:
    from torchlint.options import UsageParser, add_device_option, cannot_run, no_limit_or_more
    from torchlint.output import FORMATS

    p = UsageParser(prog="torchlint run", description="Run a training script under torchlint's monitor "
                    "and check its findings on the run.")
    p.add_argument("--steps", type=int, default=20, help="optimizer steps to run (default 20)")
    add_device_option(p, "torch's default device while the script runs, where what it builds without a device goes "
                      "(a script that picks its own device keeps it)")
    p.add_argument("--format", choices=sorted(set(FORMATS) - {"full"}), default="text")
    p.add_argument("--timeout", type=no_limit_or_more, default=600,
                   help="seconds before the run is stopped (default 600; 0: no limit)")
    p.add_argument("script", type=Path)
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    args = p.parse_args(argv)
    if not args.script.is_file():
        print(f"torchlint: error: {args.script} is not a file", file=sys.stderr)
        return EXIT_ERROR
    if args.script.suffix == ".ipynb":
        print(f"torchlint: error: {args.script} is a notebook; torchlint run runs a Python script (export it with "
              "`jupyter nbconvert --to script`)", file=sys.stderr)
        return EXIT_ERROR
    missing = cannot_run(args.device, "torchlint run")
    if missing is not None:
        print(f"torchlint: error: {missing}", file=sys.stderr)
        return EXIT_ERROR
    static = _static(args.script)
    try:
        record = _run(args.script, args.args, args.steps, args.device, args.timeout or None)
    except subprocess.TimeoutExpired:
        print(f"torchlint: error: {args.script} ran past {args.timeout:g} s; stopped", file=sys.stderr)
        return EXIT_ERROR
    if record is None:  # killed, os._exit(), or the monitor itself failed: what it printed is above
        print(f"torchlint: error: {args.script} ended before the monitor could record the run", file=sys.stderr)
        return EXIT_ERROR
    if record["error"] and not record["steps"] and not record["observations"]:
        print(f"torchlint: {args.script} failed before its first optimizer step:", file=sys.stderr)
        print(record.get("traceback") or f"{record.get('error')}\n", file=sys.stderr, end="")
        return EXIT_ERROR
    diags = combine(static, record, args.script)
    sys.stdout.write(FORMATS[args.format](diags, False, _docs_url(args.script)))
    seen = len(record["steps"])
    print(f"Ran {args.script} for {seen} optimizer step{'s' if seen != 1 else ''}"
          + (f" (it failed: {record['error']})" if record["error"] else "") + ".", file=sys.stderr)
    return EXIT_FINDINGS if diags else EXIT_OK


def _docs_url(script: Path) -> str | None:
    from torchlint.config import find_pyproject, load

    return load(find_pyproject(script)).docs_url


def _static(script: Path) -> list[Diagnostic]:
    from torchlint.project import Project
    from torchlint.config import find_pyproject, load
    from torchlint.engine import decode, lint_source, select_rules

    cfg = load(find_pyproject(script))
    decoded = decode(script.read_bytes())
    return lint_source(decoded.text, str(script), select_rules(cfg.codes_for(script)), project=Project(cfg.root))


def _run(script: Path, argv: list[str], steps: int, device: str, timeout: float | None) -> dict | None:
    """The run's record (None when the monitor wrote none). The script's own output, stdout and stderr, goes to
    torchlint's stderr as it is written, bytes as they are (kept off the report's stream)."""
    from torchlint.verify.process_group import run_group

    with tempfile.TemporaryDirectory(prefix="torchlint-run-") as tmp:
        out = Path(tmp) / "record.json"
        cmd = [sys.executable, "-m", "torchlint.verify.monitor", "--steps", str(steps), "--device", device,
               "--out", str(out), str(script), *argv]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parent.parent)]
                                                          + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
        sys.stdout.flush()
        sys.stderr.flush()
        run_group(cmd, timeout, env=env, stdout=_stderr_fd(), stderr=_stderr_fd())
        if not out.is_file():
            return None
        from torchlint.rules import attribute

        return attribute(json.loads(out.read_text(encoding="utf-8")))


def _stderr_fd() -> int:
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by an object without a file (a test's capture)
        return 2


def combine(static: list[Diagnostic], record: dict, script: Path) -> list[Diagnostic]:
    """The static findings marked by what the run showed, and what only the run saw."""
    from dataclasses import replace

    from torchlint.rules import rule_by_code

    observations = record["observations"]
    used: set[int] = set()
    here = str(script.resolve())
    out = []
    for d in static:
        status = "not observed"
        rule = rule_by_code(d.code)
        same_line = rule is not None and rule.runtime_same_line
        for i, o in enumerate(observations):
            if d.code != o["code"] and d.code not in o.get("also", ()):
                continue
            frames = [tuple(f) for f in o["frames"]]
            if not same_line or d.code != o["code"] or (here, d.line) in frames:
                status = "confirmed"
                used.add(i)
        out.append(replace(d, runtime=status))
    for i, o in enumerate(observations):
        if i in used or not o["frames"] or o.get("static_only"):
            continue  # a sign that is a bug only where the analysis says so (a cut term flows into the loss)
        path, line = o["frames"][-1]
        shown = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
        message = o["message"]
        if o.get("backwards"):
            message += "; backward at " + ", ".join(f"line {ln}" for _, ln in o["backwards"][:3])
        message += f" (observed at optimizer step {o['step'] + 1})"
        out.append(Diagnostic(shown, line, 1, line, 1, o["code"], message, runtime="runtime only"))
    return sorted(out, key=Diagnostic.sort_key)
