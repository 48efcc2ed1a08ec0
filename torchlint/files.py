"""Which files to check: paths given, directories walked for *.py, minus excludes and .gitignore'd paths."""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

import pathspec

from torchlint.config import Config
from torchlint.source.lines import split_lines


SOURCE_SUFFIXES = (".py", ".ipynb")


class PathError(Exception):
    """A path given on the command line that does not exist (exit code 2)."""


STDIN = "-"  # the path that names standard input, as for flake8 and ruff
MAX_STREAM = 64 * 1024 * 1024  # bytes read from a stream at most: /dev/zero never ends


def read_here(path: Path) -> bool:
    """Is `path` read once, by the command itself, rather than by its job: a FIFO, `<(...)` or a device can be
    read only once, and /dev/stdin or /proc/self/fd/N name another file in a worker process."""
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False  # its job says why it cannot be read
    return not regular or str(path.absolute()).startswith(("/dev/stdin", "/dev/fd/", "/proc/"))


def read_stream(stream: BinaryIO, name: str) -> bytes:
    """All of a stream (standard input, a FIFO), or PathError when it cannot be read or does not end."""
    try:
        data = stream.read(MAX_STREAM + 1)
    except OSError as exc:
        raise PathError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_STREAM:
        raise PathError(f"{name}: more than {MAX_STREAM // (1024 * 1024)} MiB; not read")
    return data


def read_named(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            return read_stream(fh, str(path))
    except OSError as exc:
        raise PathError(f"{path}: cannot read: {exc.strerror or exc}") from None


VERIFY_CANDIDATE = ".torchlint-verify-"  # in `.train.torchlint-verify-PID-N.py`, one fix of train.py (fix_verify)


def is_verify_candidate(name: str) -> bool:
    """A script `--fix --verify` writes beside the original and removes; one is left when torchlint is killed."""
    return name.startswith(".") and VERIFY_CANDIDATE in name and name.endswith(".py")


_ROOTS: dict[str, str] = {}


def _real_root(config: Config) -> str:
    """The configuration's folder with its links resolved, once per run (every entry is matched from it)."""
    key = str(config.root)
    found = _ROOTS.get(key)
    if found is None:
        found = _ROOTS[key] = os.path.realpath(key)
    return found


_PATTERNS: dict[tuple[str, ...], re.Pattern[str]] = {}


def _excluded(name: str, rel: str, patterns: tuple[str, ...]) -> bool:
    """Does the entry's name or its path from the configuration's folder match one of the patterns (fnmatch's,
    compiled once into one expression)?"""
    matcher = _PATTERNS.get(patterns)
    if matcher is None:
        matcher = _PATTERNS[patterns] = re.compile("|".join(
            fnmatch.translate(os.path.normcase(p)) for p in patterns) or r"(?!)")
    return matcher.match(os.path.normcase(name)) is not None or matcher.match(os.path.normcase(rel)) is not None


def _git_root(start: Path) -> Path | None:
    for d in [start, *start.parents]:
        if (d / ".git").exists():
            return d
    return None


def _gitignore_specs(directory: Path) -> list[tuple[Path, pathspec.PathSpec]]:
    """The .gitignore files that apply to `directory`, from the repository root down."""
    root = _git_root(directory)
    if root is None:
        return []
    chain = [directory, *directory.parents]
    chain = chain[: chain.index(root) + 1]
    specs = []
    for d in reversed(chain):
        spec = _load_gitignore(d)
        if spec is not None:
            specs.append((d, spec))
    return specs


def _load_gitignore(directory: Path) -> pathspec.PathSpec | None:
    path = directory / ".gitignore"
    try:
        lines = split_lines(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _ignored(path: Path, is_dir: bool, specs: list[tuple[Path, pathspec.PathSpec]]) -> bool:
    for base, spec in specs:
        try:
            rel = path.relative_to(base).as_posix()
        except ValueError:
            continue
        if spec.match_file(rel + ("/" if is_dir else "")):
            return True
    return False


def discover(paths: list[str], config: Config, warn: Callable[[str], None] | None = None) -> Iterator[Path]:
    """Files to check, each once, in sorted order within each directory. An entry of a walked directory that
    cannot be checked at all (a symlink loop) is skipped, and named to `warn`."""
    patterns = config.exclude + config.extend_exclude
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise PathError(f"{raw}: {'symlink loop' if _loops(path) else 'no such file or directory'}")
        if path.is_file() or not path.is_dir():
            # A file named explicitly is always checked, as with ruff and flake8; so is a FIFO or a device named
            # (the command reads it: read_here).
            if path.resolve() not in seen:
                seen.add(path.resolve())
                yield path
            continue
        base_specs = _gitignore_specs(path.resolve()) if config.respect_gitignore else []
        links: list[Path] = []
        yield from _walk(path, path, patterns, base_specs, config.respect_gitignore, seen, config, warn, links)
        # A linked file comes after the walk: when its target is in the tree it is checked (and fixed) under the
        # target's own name, once; a link to a file outside the tree is checked under the link's name.
        for link in links:
            resolved = link.resolve()
            if resolved not in seen:
                seen.add(resolved)
                yield link


def _loops(path: Path) -> bool:
    """Is `path` a symlink that never reaches a file (`x.py -> x.py`, `a -> b -> a`)?"""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _walk(
    top: Path, directory: Path, patterns, specs, gitignore: bool, seen: set[Path], config: Config, warn,
    links: list[Path],
) -> Iterator[Path]:
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return
    if gitignore and directory != top:
        local = _load_gitignore(directory)
        if local is not None:
            specs = specs + [(directory.resolve(), local)]
    real_dir = os.path.realpath(directory)  # once per folder: an entry that is no link lies in it
    root = _real_root(config)
    for entry in entries:
        path = Path(entry.path)
        is_link = entry.is_symlink()
        loop = is_link and _loops(path)
        real = None if is_link else os.path.join(real_dir, entry.name)
        # Patterns are matched from the configuration's folder, however the path was written and wherever the
        # command runs; a tree outside that folder is matched from the path given.
        if real is None:
            rel = config.relative(path)
        elif real.startswith(root + os.sep):
            rel = real[len(root) + 1:].replace(os.sep, "/")
        else:
            rel = None
        if rel is None:
            rel = path.relative_to(top).as_posix()
        if _excluded(entry.name, rel, patterns):
            continue
        if loop:  # matched where it lies, since it leads nowhere; never read
            if not (specs and _ignored(path.parent.resolve() / entry.name, False, specs)) and warn is not None:
                warn(f"{path}: symlink loop; not checked")
            continue
        try:
            is_dir = entry.is_dir()
        except OSError:
            continue
        if specs and _ignored(Path(real) if real is not None else path.resolve(), is_dir, specs):
            continue
        if is_dir:
            if entry.is_symlink():
                continue  # never follow directory links: no loops, no escaping the tree
            yield from _walk(top, path, patterns, specs, gitignore, seen, config, warn, links)
        elif entry.name.endswith(SOURCE_SUFFIXES) and entry.is_file():
            if is_verify_candidate(entry.name):
                continue
            if entry.is_symlink():
                links.append(path)
                continue
            resolved = Path(real) if real is not None else path.resolve()
            if resolved not in seen:
                seen.add(resolved)
                yield path
