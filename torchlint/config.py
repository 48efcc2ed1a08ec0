"""`[tool.torchlint]` in the nearest pyproject.toml (or a file given with --config), merged with the CLI."""

from __future__ import annotations

import fnmatch

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from torchlint.codes import META_RULES
from torchlint.excluded import DEFAULT_EXCLUDE
from torchlint.rules import rule_codes

KNOWN_KEYS = {"select", "ignore", "extend-select", "exclude", "extend-exclude", "per-file-ignores",
              "respect-gitignore", "unsafe-fixes", "docs-url"}


class ConfigError(Exception):
    """A user mistake in configuration or options (exit code 2)."""


@dataclass(frozen=True)
class Config:
    select: tuple[str, ...] = ("TL",)
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    respect_gitignore: bool = True
    unsafe_fixes: bool = False
    docs_url: str | None = None  # where the rule pages linked from findings are; None: the pages of the package
    root: Path = Path(".")  # directory that relative patterns are resolved against

    def codes(self) -> list[str]:
        """Rule codes enabled by select/extend-select minus ignore (prefix matching, as ruff and flake8 do)."""
        chosen = [code for code in rule_codes() if _matches(code, self.select + self.extend_select)]
        return [c for c in chosen if not _matches(c, self.ignore)]

    def relative(self, path: Path) -> str | None:
        """`path` relative to the folder holding the configuration (how exclude, extend-exclude and
        per-file-ignores patterns are matched, as ruff does), or None when it lies outside that folder."""
        try:
            real = path.resolve()
        except (OSError, RuntimeError):  # a symlink loop: where it lies
            real = path.parent.resolve() / path.name
        try:
            return real.relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return None

    def codes_for(self, path: Path) -> list[str]:
        """The codes enabled for one file: `codes()` minus its per-file-ignores. One answer for the command,
        pre-commit and the language server."""
        codes = self.codes()
        if not self.per_file_ignores:
            return codes
        rel = self.relative(path)
        ignored: tuple[str, ...] = ()
        for pattern, pcodes in self.per_file_ignores.items():
            if (rel is not None and fnmatch.fnmatch(rel, pattern)) or fnmatch.fnmatch(path.name, pattern):
                ignored += pcodes
        return [c for c in codes if not _matches(c, ignored)]


def _matches(code: str, prefixes: tuple[str, ...]) -> bool:
    return any(p == "ALL" or code.startswith(p) for p in prefixes)


def validate_codes(codes: tuple[str, ...], where: str) -> tuple[str, ...]:
    """Every code or prefix must name at least one rule (or be one of the TL9xx diagnostics)."""
    rules = list(rule_codes())
    known = rules + list(META_RULES)
    out = []
    for raw in codes:
        code = raw.strip().upper()
        if not code:
            continue
        if code != "ALL" and not any(k.startswith(code) for k in known):
            raise ConfigError(f"unknown rule code {raw.strip()!r} in {where} (known: {', '.join(rules)})")
        out.append(code)
    return tuple(out)


def read_toml(path: Path) -> dict:
    """A TOML file's data; ConfigError, in one line, when it cannot be read, is not UTF-8 or is not valid TOML."""
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset "
                          f"{exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML in {path}: {' '.join(str(exc).split())}") from None
    except RecursionError:  # nesting deeper than the parser's stack
        raise ConfigError(f"invalid TOML in {path}: nested too deeply") from None


def _tool_table(data: dict, path: Path) -> dict:
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"'tool' in {path} must be a table")
    return tool


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml with a [tool.torchlint] table, from `start` up. One on the way that cannot be
    read may be that configuration: ConfigError, never a quiet skip to the defaults or a file further up."""
    start = start.resolve()
    for directory in [start, *start.parents] if start.is_dir() else [start.parent, *start.parent.parents]:
        candidate = directory / "pyproject.toml"
        if candidate.is_file() and "torchlint" in _tool_table(read_toml(candidate), candidate):
            return candidate
    return None


def load(path: Path | None) -> Config:
    """The configuration in `path` (a pyproject.toml, or a TOML file given with --config; None: the defaults), or
    ConfigError, in one line, for anything in it that torchlint does not understand."""
    if path is None:
        return Config(root=Path.cwd())
    data = read_toml(path)
    tool = _tool_table(data, path)
    section = tool.get("torchlint", {}) if path.name == "pyproject.toml" else tool.get("torchlint", data)
    if not isinstance(section, dict):
        raise ConfigError(f"[tool.torchlint] in {path} must be a table")
    unknown = sorted(set(section) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r} in [tool.torchlint] of {path} (known: {', '.join(sorted(KNOWN_KEYS))})")
    where = f"[tool.torchlint] of {path}"
    cfg = Config(root=path.parent.resolve())

    def codes(key: str) -> tuple[str, ...]:
        value = section.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{key!r} in {where} must be a list of rule codes")
        return validate_codes(tuple(value), where)

    def strings(key: str) -> tuple[str, ...]:
        value = section.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{key!r} in {where} must be a list of strings")
        return tuple(value)

    pfi = section.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise ConfigError(f"'per-file-ignores' in {where} must be a table of pattern = [codes]")
    per_file = {}
    for pattern, value in pfi.items():
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"'per-file-ignores' entry {pattern!r} in {where} must be a list of rule codes")
        per_file[pattern] = validate_codes(tuple(value), where)
    for flag in ("respect-gitignore", "unsafe-fixes"):
        if flag in section and not isinstance(section[flag], bool):
            raise ConfigError(f"{flag!r} in {where} must be true or false")
    docs_url = section.get("docs-url")
    if docs_url is not None and (not isinstance(docs_url, str) or not docs_url.strip()):
        raise ConfigError(f"'docs-url' in {where} must be a URL (the folder of the rule pages, or a URL with {{code}})")
    return replace(
        cfg,
        docs_url=docs_url.strip() if docs_url else None,
        select=codes("select") or cfg.select,
        ignore=codes("ignore"),
        extend_select=codes("extend-select"),
        exclude=strings("exclude") or cfg.exclude,
        extend_exclude=strings("extend-exclude"),
        per_file_ignores=per_file,
        respect_gitignore=section.get("respect-gitignore", True),
        unsafe_fixes=section.get("unsafe-fixes", False),
    )
