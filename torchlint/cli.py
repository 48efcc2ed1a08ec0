"""The `torchlint` command: report, --fix/--diff, `rule` docs. A thin shell over torchlint.engine.

Exit codes: 0 nothing found, 1 findings (or a --diff with changes), 2 usage, configuration or I/O error (also a
file --fix or --add-noqa did not write: torchlint.source.write_back; a run --verify could not record; `verify`
with no optimizer step to compare), 143 SIGTERM.
"""

from __future__ import annotations

import argparse
import difflib
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import NoReturn, Sequence

from torchlint import __version__
from torchlint.batch import Job
from torchlint.batch import run as run_jobs
from torchlint.config import Config, ConfigError, find_pyproject, load, validate_codes
from torchlint.diagnostic import Diagnostic
from torchlint.files import STDIN, PathError, discover, read_here, read_named, read_stream
from torchlint.options import add_device_option, cannot_run, device_missing
from torchlint.output import FORMATS, render_full, render_statistics
from torchlint.syspath import protect

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, as documented
        self.exit(EXIT_ERROR, f"torchlint: error: {message}\n")


def _codes(value: str) -> tuple[str, ...]:
    return tuple(c for c in value.replace(" ", ",").split(",") if c)


def _positive_int(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError("must be 0 (one per CPU) or more")
    return n


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="torchlint", description="Find and fix PyTorch training-loop mistakes.")
    p.add_argument("paths", nargs="*", default=None,
                   help="files or directories (default: .); - reads standard input")
    p.add_argument("--stdin-filename", metavar="PATH",
                   help="the name of the file read from standard input (its configuration, per-file-ignores, .ipynb)")
    p.add_argument("--select", type=_codes, help="rule codes or prefixes to enable (default: TL)")
    p.add_argument("--ignore", type=_codes, help="rule codes or prefixes to disable")
    p.add_argument("--extend-select", type=_codes, help="codes to enable in addition to the selected ones")
    p.add_argument("--format", choices=sorted(FORMATS), default="text", help="output format")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when problems are found")
    p.add_argument("--config", type=Path, help="a pyproject.toml (or TOML file) to read settings from")
    p.add_argument("--isolated", action="store_true", help="ignore all configuration files")
    p.add_argument("-q", "--quiet", action="store_true", help="print diagnostics only, no summary")
    p.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    p.add_argument("--verify", action="store_true",
                   help="with --fix: run the script with each fix and without, and keep only the fixes proven on it")
    p.add_argument("--steps", type=int, default=20, help="with --verify: optimizer steps to run (default 20)")
    p.add_argument("--verify-args", type=shlex.split, default=[], metavar="ARGS",
                   help='with --verify: the script\'s own arguments, as one shell-quoted string ("--lr 0.1")')
    add_device_option(p, "with --verify: torch's default device for the runs")
    p.add_argument("--report", type=Path, help="with --verify: write per-step plots of each fix to this HTML file")
    p.add_argument("--unsafe-fixes", action="store_true", help="also apply fixes that change behaviour")
    p.add_argument("--diff", action="store_true", help="print the diff --fix would make; write nothing")
    p.add_argument("--add-noqa", action="store_true",
                   help="add `# noqa: TLxxx` to every line with a finding (accept today's findings)")
    p.add_argument("--no-respect-gitignore", action="store_true", help="also check files that .gitignore lists")
    p.add_argument("--statistics", action="store_true", help="print the number of findings per rule instead")
    p.add_argument("-o", "--output-file", type=Path, help="write the report to this file instead of stdout")
    p.add_argument("-j", "--jobs", type=_positive_int, default=0, help="worker processes (default: one per CPU)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write .torchlint_cache/")
    p.add_argument("--no-project", action="store_true",
                   help="check each file alone: do not follow calls into the project's other files")
    p.add_argument("--file-timeout", type=float, default=60.0, help="seconds allowed per file (0: no limit)")
    p.add_argument("--version", action="version", version=f"torchlint {__version__}")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    protect()  # before anything is imported lazily: the repository checked is never imported (torchlint.syspath)
    argv = list(sys.argv[1:] if argv is None else argv)
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if on_main_thread else None
    try:
        if argv and argv[0] == "rule":
            return _rule_command(argv[1:])
        if argv and argv[0] == "server":
            return _server_command(argv[1:])
        if argv and argv[0] == "verify":
            return _verify_command(argv[1:])
        if argv and argv[0] == "run":
            from torchlint.run_command import main as run_main

            return run_main(argv[1:])
        if argv and argv[0] == "check":
            argv = argv[1:]
        return _check(build_parser().parse_args(argv))
    except (ConfigError, PathError) as exc:
        print(f"torchlint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    finally:
        if on_main_thread:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _terminated(signum, frame) -> None:
    # An exception, not the default death: what torchlint started (pool workers, a training script's process
    # group, --verify's temporary scripts) is cleaned up on the way out. Exit status 128 + 15, as the shell reports.
    raise SystemExit(128 + signum)


def _rule_command(argv: list[str]) -> int:
    from torchlint.rule_docs import FIX_SHORT, render
    from torchlint.rules import all_rules, rule_by_code, rule_codes

    p = _Parser(prog="torchlint rule", description="Print a rule's documentation.")
    p.add_argument("code", nargs="?")
    p.add_argument("--all", action="store_true", help="list every rule with its fix safety")
    args = p.parse_args(argv)
    if args.all or not args.code:
        for r in all_rules():
            print(f"{r.code}  {r.name:32} fix: {FIX_SHORT[r.fix_safety]:12} {r.summary}")
        return EXIT_OK
    rule = rule_by_code(args.code.upper())
    if rule is None:
        print(f"torchlint: error: unknown rule code {args.code!r} (known: {', '.join(rule_codes())})", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.write(render(rule))
    return EXIT_OK


def _server_command(argv: list[str]) -> int:
    """Run the language server on stdin/stdout (for editors)."""
    p = _Parser(prog="torchlint server", description=_server_command.__doc__)
    p.add_argument("--stdio", action="store_true", help="accepted for editors that pass it; stdio is the only transport")
    p.add_argument("--file-timeout", type=float, default=60.0,
                   help="seconds allowed to check a document (0: no limit); past it, TL904")
    args = p.parse_args(argv)
    try:
        from torchlint.lsp_server import main as serve
    except ImportError as exc:
        print(f"torchlint: error: the language server needs pygls ({exc.name} is missing): pip install 'torchlint[lsp]'",
              file=sys.stderr)
        return EXIT_ERROR
    return serve(args.file_timeout)


def _verify_command(argv: list[str]) -> int:
    """Run a script and a reference with the same seeds; compare gradients and parameters at every step."""
    p = _Parser(prog="torchlint verify", description=_verify_command.__doc__)
    p.add_argument("script", type=Path, help="the training script to check (e.g. the output of --fix)")
    p.add_argument("--reference", type=Path, required=True, help="a correct script it must match")
    add_device_option(p, "torch's default device for both runs")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--atol", type=float, default=1e-6)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for path in (args.script, args.reference):
        if not path.is_file():
            raise PathError(f"{path}: no such file")
    try:
        from torchlint.verify import Tolerance, compare_records, run_scripts
    except ImportError as exc:
        print(f"torchlint: error: verify needs torch ({exc.name} is missing): pip install 'torchlint[verify]'", file=sys.stderr)
        return EXIT_ERROR
    missing = device_missing(args.device)
    if missing is not None:
        print(f"torchlint: error: {missing}", file=sys.stderr)
        return EXIT_ERROR
    try:
        run, ref = run_scripts([args.script, args.reference], args.device, args.seed)
    except RuntimeError as exc:
        print(f"torchlint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    tol = Tolerance(args.rtol, args.atol)
    mismatch = compare_records(run, ref, tol)
    if mismatch is None and not run["steps"]:  # verified means steps were compared
        print("NOT VERIFIED: neither script took an optimizer step; nothing was compared"
              + (f" ({args.script} failed: {run['error']})" if run["error"] else ""))
        return EXIT_ERROR
    if mismatch is None:
        print(f"OK: {len(run['steps'])} optimizer steps match the reference on {args.device} "
              f"(rtol={tol.rtol:g}, atol={tol.atol:g}; gradients and parameters at every step)")
        return EXIT_OK
    print(f"MISMATCH: {mismatch}")
    if run["error"]:
        print(f"{args.script} failed: {run['error']}")
    return EXIT_FINDINGS


def _config(args: argparse.Namespace) -> Config:
    if args.isolated:
        cfg = Config(root=Path.cwd())
    elif args.config is not None:
        if not args.config.is_file():
            raise ConfigError(f"config file {args.config} does not exist")
        cfg = load(args.config)
    elif args.stdin_filename and (not args.paths or args.paths[0] == STDIN):
        cfg = load(find_pyproject(Path(args.stdin_filename).absolute()))
    else:
        first = Path(args.paths[0]) if args.paths else Path.cwd()
        cfg = load(find_pyproject(first if first.exists() else Path.cwd()))
    from dataclasses import replace

    if args.select:
        cfg = replace(cfg, select=validate_codes(args.select, "--select"))
    if args.extend_select:
        cfg = replace(cfg, extend_select=cfg.extend_select + validate_codes(args.extend_select, "--extend-select"))
    if args.ignore:
        cfg = replace(cfg, ignore=cfg.ignore + validate_codes(args.ignore, "--ignore"))
    if args.no_respect_gitignore:
        cfg = replace(cfg, respect_gitignore=False)
    if args.unsafe_fixes:
        cfg = replace(cfg, unsafe_fixes=True)
    return cfg


def _enabled_meta(code: str, cfg: Config) -> bool:
    """TL9xx (unreadable file, syntax error, internal error) are always shown unless ignored explicitly."""
    return not any(code.startswith(i) for i in cfg.ignore if i.startswith("TL9"))


def _shown(diags, cfg: Config) -> list[Diagnostic]:
    """The diagnostics to report, sorted: the rules' (their selection made the jobs) and the TL9xx not ignored."""
    return sorted((d for d in diags if not d.code.startswith("TL9") or _enabled_meta(d.code, cfg)),
                  key=Diagnostic.sort_key)


def _check(args: argparse.Namespace) -> int:
    cfg = _config(args)
    paths = args.paths or ([STDIN] if args.stdin_filename else ["."])
    if args.add_noqa and (args.fix or args.diff):
        raise ConfigError("--add-noqa cannot be combined with --fix or --diff")
    stdin = STDIN in paths
    if stdin and args.add_noqa:
        raise ConfigError("--add-noqa cannot write to standard input (-)")
    if stdin and args.verify:
        raise ConfigError("--verify runs a script file, not standard input (-)")
    if stdin and args.fix and not args.diff and len(set(paths)) > 1:
        raise ConfigError("--fix of standard input (-) writes the fixed source to stdout: give no other path")
    files = list(discover([p for p in paths if p != STDIN], cfg,
                          lambda message: print(f"torchlint: warning: {message}", file=sys.stderr)))
    given = _read_streams(args, files)
    if stdin:
        name = Path(args.stdin_filename or STDIN)
        files.insert(0, name)
        given[name] = read_stream(sys.stdin.buffer, "standard input")
    if args.verify:
        if not args.fix or args.diff:
            raise ConfigError("--verify goes with --fix (and not --diff)")
        lacking = _verify_lacks(args)
        if lacking is not None:  # said before any script runs or any fix is written
            print(f"torchlint: error: {lacking}", file=sys.stderr)
            return EXIT_ERROR
        return _fix_verify(args, cfg, files)
    # --fix of standard input is a diff job: the fixed text comes back, and is written to stdout (_fix_stdin)
    mode = "noqa" if args.add_noqa else "diff" if args.diff or (stdin and args.fix) else "fix" if args.fix else "check"
    jobs = [
        Job(str(path), tuple(cfg.codes_for(path)), mode, cfg.unsafe_fixes, args.format in ("json", "sarif"),
            args.file_timeout, None if args.no_project else str(cfg.root), given.get(path))
        for path in files
    ]
    if stdin and args.fix and not args.diff:
        return _fix_stdin(args, cfg, jobs[0], given[files[0]])
    cache_root = None if args.no_cache or mode != "check" else cfg.root
    diags: list[Diagnostic] = []
    diffs: list[bytes] = []
    fixed = 0
    not_written: list[str] = []
    for outcome in run_jobs(jobs, args.jobs, cache_root):
        diags.extend(outcome.diags)
        fixed += outcome.applied
        if outcome.error is not None:
            not_written.append(outcome.error)
        if outcome.before is not None and outcome.after is not None:
            diffs.append(_unified(outcome.path, outcome.before, outcome.after, outcome.encoding))
    for error in not_written:
        print(f"torchlint: error: {error}", file=sys.stderr)
    if args.add_noqa:
        if not args.quiet:
            print(f"Added {fixed} noqa directive{'s' if fixed != 1 else ''}.", file=sys.stderr)
        return EXIT_ERROR if not_written else EXIT_OK
    diags = _shown(diags, cfg)
    out = sys.stdout
    if args.diff:
        out.flush()
        out.buffer.write(b"".join(diffs))
        out.buffer.flush()
        if not args.quiet:
            problems = f"{fixed} problem{'s' if fixed != 1 else ''}"
            print(f"Would fix {problems} in {len(diffs)} file{'s' if len(diffs) != 1 else ''}.", file=sys.stderr)
        return EXIT_OK if args.exit_zero or not diffs else EXIT_FINDINGS
    if args.format == "full" and not args.statistics:
        # colour only on a terminal: never in a report file
        report = render_full(diags, cfg.unsafe_fixes, cfg.docs_url,
                             color=False if args.output_file is not None else None,
                             given={str(path): data for path, data in given.items()})
    else:
        render = render_statistics if args.statistics else FORMATS[args.format]
        report = render(diags, cfg.unsafe_fixes, cfg.docs_url)
    if args.output_file is not None:
        try:
            args.output_file.write_text(report, encoding="utf-8")
        except OSError as exc:
            raise PathError(f"cannot write {args.output_file}: {exc.strerror}") from None
    else:
        out.write(report)
    if (args.format in ("text", "full") or args.output_file is not None) and not args.quiet:
        _summary(diags, fixed, len(files), cfg.unsafe_fixes, args.fix)
    if not_written:
        return EXIT_ERROR
    return EXIT_OK if args.exit_zero or not diags else EXIT_FINDINGS


def _read_streams(args: argparse.Namespace, files: list[Path]) -> dict[Path, bytes]:
    """The bytes of the files named that the command reads itself (a FIFO, a device: files.read_here); PathError
    for one of them with --fix or --add-noqa, which could not write it back."""
    given = {}
    for path in files:
        if read_here(path):
            if (args.fix and not args.diff) or args.add_noqa:
                option = "--add-noqa" if args.add_noqa else "--fix"
                raise PathError(f"{path}: not a regular file (read as a stream); {option} cannot write it")
            given[path] = read_named(path)
    return given


def _fix_stdin(args: argparse.Namespace, cfg: Config, job: Job, data: bytes) -> int:
    """--fix of standard input, as ruff does it: the fixed source on stdout, what is left to report on stderr."""
    (outcome,) = run_jobs([job], 1, None)
    sys.stdout.flush()
    sys.stdout.buffer.write(data if outcome.after is None else outcome.after.encode(outcome.encoding))
    sys.stdout.buffer.flush()
    diags = _shown(outcome.diags, cfg)
    if args.format == "full":
        sys.stderr.write(render_full(diags, cfg.unsafe_fixes, cfg.docs_url, color=False, given={job.path: data}))
    else:
        sys.stderr.write(FORMATS[args.format](diags, cfg.unsafe_fixes, cfg.docs_url))
    if not args.quiet:
        _summary(diags, outcome.applied, 1, cfg.unsafe_fixes, True, out=sys.stderr)
    return EXIT_OK if args.exit_zero or not diags else EXIT_FINDINGS


def _verify_lacks(args: argparse.Namespace) -> str | None:
    """What --fix --verify needs and this machine lacks: torch, the CUDA device asked for, matplotlib for --report."""
    missing = cannot_run(args.device, "--verify")
    if missing is None and args.report is not None:
        from torchlint.report import missing as report_missing

        missing = report_missing()
    return missing


def _fix_verify(args: argparse.Namespace, cfg: Config, files: list[Path]) -> int:
    """--fix --verify: each fix proven on a run of the script (torchlint.fix_verify), then the kept ones written."""
    from torchlint.project import Project
    from torchlint.engine import SourceError, decode, lint_source, select_rules
    from torchlint.batch import write_fixed
    from torchlint.fix_verify import diagnostics, verify_fixes

    project = Project(cfg.root)
    diags: list[Diagnostic] = []
    fixed = failed = 0
    runs: list[dict] | None = [] if args.report is not None else None
    for path in files:
        if path.suffix != ".py":
            print(f"torchlint: {path}: --verify runs Python scripts; not a notebook", file=sys.stderr)
            continue
        rules = select_rules(cfg.codes_for(path))
        data = None
        try:
            data = path.read_bytes()  # what is verified, and what the file must still hold when it is written
            verdicts, new_text = verify_fixes(path, rules, cfg.unsafe_fixes, args.steps, args.device, project, runs,
                                              data=data, argv=args.verify_args)
        except (OSError, SourceError, RuntimeError) as exc:  # unreadable, or the recorder itself failed: this file
            # is not fixed (its findings are still reported), the next ones still are
            print(f"torchlint: error: {path}: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
            failed += 1
            if data is None or isinstance(exc, SourceError):
                continue
            verdicts, new_text = [], None
        for v in verdicts:
            if v.kept:
                print(f"{path}:{v.line}:{v.column}: {v.code} {v.applicability} fix verified: {v.detail}",
                      file=sys.stderr)
        diags.extend(diagnostics(str(path), verdicts))
        decoded = decode(data)
        written = write_fixed(path, data, decoded.text, new_text, decoded.encoding)
        if written.error is not None:
            print(f"torchlint: error: {written.error}", file=sys.stderr)
            failed += 1
        elif new_text is not None:
            fixed += sum(v.kept for v in verdicts)
        diags.extend(lint_source(written.text, str(path), rules, project=project))
    if args.report is not None:
        from torchlint.report import write_report

        write_report(args.report, files[0] if len(files) == 1 else Path("."), runs or [])
    diags.sort(key=Diagnostic.sort_key)
    sys.stdout.write(FORMATS[args.format](diags, cfg.unsafe_fixes, cfg.docs_url))
    if not args.quiet:
        _summary(diags, fixed, len(files), cfg.unsafe_fixes, True)
    if failed:
        return EXIT_ERROR
    return EXIT_OK if args.exit_zero or not diags else EXIT_FINDINGS


def _summary(diags: list[Diagnostic], fixed: int, nfiles: int, unsafe: bool, fixing: bool, out=None) -> None:
    parts = []
    if fixing:
        parts.append(f"Fixed {fixed} problem{'s' if fixed != 1 else ''}.")
    if not diags:
        parts.append(f"All checks passed ({nfiles} file{'s' if nfiles != 1 else ''}).")
    else:
        safe = sum(1 for d in diags if d.fix and d.fix.applicability == "safe")
        hidden = sum(1 for d in diags if d.fix and d.fix.applicability == "unsafe")
        line = f"Found {len(diags)} problem{'s' if len(diags) != 1 else ''} in {nfiles} file{'s' if nfiles != 1 else ''}."
        if safe:
            line += f" {safe} fixable with --fix."
        if hidden:
            more = "more " if safe else ""
            line += f" {hidden} {more}fixable with --fix --unsafe-fixes."
        parts.append(line)
    print(" ".join(parts), file=out)


def _unified(name: str, before: str, after: str, encoding: str) -> bytes:
    """The diff `patch -p1` applies: the file's own bytes (its encoding, BOM and line breaks), lines split where
    patch splits them (at `\n`: a `\r`-only file is one line to patch), and `\\ No newline at end of file` after
    a last line without one, so the next file's header starts on a line of its own."""
    a, b = _patch_lines(before.encode(encoding)), _patch_lines(after.encode(encoding))
    out = []
    for line in difflib.diff_bytes(difflib.unified_diff, a, b, f"a/{name}".encode(), f"b/{name}".encode()):
        out.append(line)
        if not line.endswith(b"\n"):
            out.append(b"\n\\ No newline at end of file\n")
    return b"".join(out)


def _patch_lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    last = lines.pop()
    return [line + b"\n" for line in lines] + ([last] if last else [])


if __name__ == "__main__":
    sys.exit(main())
