"""Project analysis: what the functions and classes of the other files of a project do, as their callers see it.

When torchlint checks a directory or several files, a call to a function imported from another file of the
project (`from .engine import train_one_epoch`, `import utils; utils.train_step(...)`) and `self.method()`
inherited from a base class in another file are answered by that file's *exports*: for each function, class and
method, the summary a caller needs (what it steps, zeroes, builds, whether it trains, what it returns) and the
per-batch events a caller's iteration gains at the call (backward, step, zero_grad, scheduler step ...), each with
its line in the other file, so that a message can name it.

- Exports are computed from the exporting file alone (its own helpers inlined, as for any file), so they never
  depend on the order files are visited in, and a cycle of imports needs no special case: calls that file cannot
  resolve are marked opaque, and a caller stays silent where they could matter, as it does today.
- They are cached by content hash (in memory, and on disk beside the results), so a file imported by twenty
  others is parsed once.
- A file is only followed when its text can hold events at all (a backward, a step, a zero_grad ...): the rest of
  a project (models, data, utilities) costs one text search, never a parse.
- Every project file a check looked at, and every file an import was looked for at and not found, is recorded
  (`ProjectView.reads`); the cache keeps their hashes with the result, which is valid only while those files are
  unchanged (and the missing ones still missing).

Imports are read from the text (`scan_imports`), before parsing: the prefilter needs to know whether a file that
holds no training events itself calls a helper that does.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

from torchlint.analysis.events import EventKind
from torchlint.safe_read import read_regular

EXPORTS_VERSION = "2"

# Text that any exported event needs (a backward, a step, a zero_grad or gradient reset, a GradScaler call).
EVENT_TEXT = re.compile(r"\.backward\s*\(|manual_backward\s*\(|\.\s*step\s*\(|zero_grad|\.grad\s*=\s*None|\.grad\.zero_")
_EVENT_BYTES = re.compile(EVENT_TEXT.pattern.encode())

_IMPORTS = re.compile(
    r"(?m)^[ \t]*(?:from[ \t]+(\.*)[ \t]*([\w.]*)[ \t]+)?import[ \t]+(\([^)]*\)|(?:[^\n#;\\]|\\\n)*)"
)
MODULE_BASES = frozenset({"Module", "LightningModule", "Sequential", "ModuleList", "ModuleDict"})
_EXPORTED_KINDS = {
    EventKind.BACKWARD, EventKind.STEP, EventKind.ZERO_GRAD, EventKind.SCHED_STEP, EventKind.CLIP,
    EventKind.SCALER_UPDATE, EventKind.SCALER_UNSCALE,
}


@dataclass(frozen=True)
class Imported:
    """What a name of the importing file is bound to: a module (`name` None) or a name in a module."""

    module: str  # dotted, without the leading dots
    level: int  # leading dots of a relative import
    name: str | None = None
    subs: tuple[str, ...] = ()  # `import a.b.c` binds `a` and names its submodule `b.c`


def scan_imports(text: str) -> dict[str, Imported]:
    """The names a file binds by import statements, read from its text (any indentation; an import in a string
    is read too, which only makes a call resolvable that the file's model then checks against its own code)."""
    bound: dict[str, Imported] = {}
    for m in _import_lines(text):
        names = m.group(3).strip("()").replace("\\\n", " ")
        if m.group(2) is not None:  # from X import a, b as c
            dots, module = len(m.group(1)), m.group(2)
            for item in names.split(","):
                parts = item.split()
                if parts and parts[0] != "*":
                    local = parts[2] if len(parts) == 3 and parts[1] == "as" else parts[0]
                    bound[local] = Imported(module, dots, parts[0])
            continue
        for item in names.split(","):  # import a.b, c as d
            parts = item.split()
            if not parts:
                continue
            if len(parts) == 3 and parts[1] == "as":
                bound[parts[2]] = Imported(parts[0], 0)
            else:
                head, _, sub = parts[0].partition(".")
                known = bound.get(head)
                subs = known.subs if known is not None and known.name is None and known.module == head else ()
                bound[head] = Imported(head, 0, None, subs + ((sub,) if sub else ()))
    return bound


def _import_lines(text: str) -> Iterator[re.Match[str]]:
    """`_IMPORTS` matched at the start of each line holding `import` (found by a plain substring search, much
    faster than letting the pattern try every line)."""
    pos, done = 0, -1
    while True:
        hit = text.find("import", pos)
        if hit < 0:
            return
        start = text.rfind("\n", 0, hit) + 1
        pos = hit + 6
        if start <= done:
            continue
        m = _IMPORTS.match(text, start)
        if m is not None:
            done = m.end()
            pos = max(pos, done)
            yield m


@dataclass
class ExportedEvent:
    kind: str  # an EventKind value
    target: str | None
    flavor: str
    via: str | None
    line: int
    contexts: tuple[str, ...] = ()


@dataclass
class FunctionExport:
    line: int
    params: list[str]  # positional order, `self` included for methods
    trains: bool  # holds its own training loop (a run of its own)
    steps: list[str]  # optimizers it steps, as named in the function
    events: list[ExportedEvent]  # per-batch events a caller's iteration gains at the call (unguarded only)
    zeroes: bool  # clears gradients somewhere (guarded or not)
    handed: list[str]  # its parameters (and `self`) that it hands to calls its own file cannot resolve
    returns: str  # a VKind name


@dataclass
class Exports:
    functions: dict[str, FunctionExport] = field(default_factory=dict)
    # class -> its methods that may act (`acting`); its bases are read from the text (`Project.bases`)
    classes: dict[str, dict[str, FunctionExport]] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, data: str) -> "Exports":
        raw = json.loads(data)

        def fn(d: dict) -> FunctionExport:
            events = [ExportedEvent(**{**e, "contexts": tuple(e["contexts"])}) for e in d.pop("events")]
            return FunctionExport(events=events, **d)

        return cls(
            {k: fn(v) for k, v in raw["functions"].items()},
            {k: {m: fn(f) for m, f in methods.items()} for k, methods in raw["classes"].items()},
        )


@dataclass(frozen=True)
class Resolved:
    """A callee in another file of the project: what it does, and where it is (for messages)."""

    export: FunctionExport
    path: str  # as shown in messages: relative to the project root
    name: str


class Project:
    """The files of one project (the directory torchlint was run on, or its configuration's root), read lazily.

    `cached_only`: only exports already on disk are used (the flake8 plugin and the language server check one
    file at a time and must not parse its imports); a file without them is checked alone."""

    def __init__(self, root: Path, cache_dir: Path | None = None, cached_only: bool = False) -> None:
        self.root = root.resolve()
        self.cache_dir = cache_dir
        self.cached_only = cached_only
        self._texts: dict[Path, tuple[str, str] | None] = {}
        self._exports: dict[str, Exports | None] = {}  # by content hash
        self._acting: dict[str, frozenset[str]] = {}  # by content hash: `acting`
        self._eventful: dict[Path, bool] = {}  # has_events
        self._any: dict[Path, bool] = {}  # may_act_any
        self._modules: dict[tuple[str, str, int], Path | None] = {}  # module_file
        # module_file: each file it looked for up to the one found, present or not (creating one changes the answer)
        self._candidates: dict[tuple[str, str, int], tuple[Path, ...]] = {}
        self._lookups: dict[tuple, tuple[object, dict[str, Path]]] = {}  # ProjectView._memo
        self._dirs: dict[str, frozenset[str]] = {}  # directory listings
        self._shown: dict[Path, str] = {}  # display
        self._root_prefix = str(self.root).rstrip(os.sep) + os.sep
        self._classes: dict[str, dict[str, list[str]]] = {}  # by content hash: each class's bases, as written
        self.reads: dict[Path, dict[str, Path]] = {}  # for each file viewed: the project files it looked at

    # -- files -----------------------------------------------------------------------------------------------
    def text(self, path: Path, data: bytes | None = None) -> tuple[str, str] | None:
        """(text, content hash) of a project file (from `data` when its bytes were just read), or None when it
        cannot be read or decoded."""
        if path in self._texts:
            return self._texts[path]
        from torchlint.pipeline.decode import SourceError, decode

        try:
            data = read_regular(path) if data is None else data
            found = (decode(data).text, content_hash(data))
        except (OSError, SourceError):
            found = None
        self._texts[path] = found
        return found

    def module_file(self, importer: Path, imp: Imported) -> Path | None:
        """The file of the module `imp` names, seen from `importer` (a resolved path), or None outside the
        project. Directory listings are read once each: no file system call per import."""
        directory = os.path.dirname(str(importer))
        key = (directory, imp.module, imp.level)
        if key in self._modules:
            return self._modules[key]
        parts = [p for p in imp.module.split(".") if p]
        if imp.level:
            base = directory
            for _ in range(imp.level - 1):
                base = os.path.dirname(base)
            bases = [base]
        else:
            # A script's own directory comes first on sys.path, then the project root (and a src/ layout).
            root = str(self.root)
            bases = list(dict.fromkeys([directory, root, os.path.join(root, "src")]))
        found = None
        looked: list[str] = []
        for base in bases:
            here = base
            for part in parts[:-1]:
                if part not in self._listing(here):
                    here = ""
                    break
                here = os.path.join(here, part)
            if not here:
                looked.extend(_tried(os.path.join(base, *parts[:-1]), parts))
                continue
            looked.extend(_tried(here, parts))
            names = self._listing(here)
            if parts and parts[-1] + ".py" in names:
                found = os.path.join(here, parts[-1] + ".py")
            elif parts and parts[-1] in names and "__init__.py" in self._listing(os.path.join(here, parts[-1])):
                found = os.path.join(here, parts[-1], "__init__.py")
            elif not parts and "__init__.py" in names:
                found = os.path.join(here, "__init__.py")
            if found is not None:
                break
        result = Path(found) if found is not None and found.startswith(self._root_prefix) else None
        self._modules[key] = result
        self._candidates[key] = tuple(Path(p) for p in looked if p.startswith(self._root_prefix))
        return result

    def _listing(self, directory: str) -> frozenset[str]:
        found = self._dirs.get(directory)
        if found is None:
            try:
                found = frozenset(os.listdir(directory))
            except OSError:
                found = frozenset()
            self._dirs[directory] = found
        return found

    def exports(self, path: Path) -> Exports | None:
        """The exports of a project file; None when it holds no events or cannot be analysed."""
        got = self.text(path)
        if got is None:
            return None
        text, digest = got
        if digest in self._exports:
            return self._exports[digest]
        found = None
        if EVENT_TEXT.search(text):
            found = self._load(digest)
            if found is None and not self.cached_only:
                found = compute_exports(text, self._acting_of(path))
                if found is not None:
                    self._store(digest, found)
        self._exports[digest] = found
        return found

    def has_events(self, path: Path) -> bool:
        """Can this file hold events at all (its text has a backward, a step, a zero_grad ...)? Searched in its
        bytes: a file without events is never decoded or kept."""
        found = self._eventful.get(path)
        if found is None:
            try:
                data = read_regular(path)  # an import may name a FIFO: never wait on one
            except OSError:
                data = b""
            found = self._eventful[path] = (_EVENT_BYTES.search(data) is not None
                                            and self.text(path, data) is not None)
        return found

    def may_act(self, path: Path, name: str, prefix: bool = False) -> bool:
        """Can `name` (a function, or `Class.method`; with `prefix`, also a class with such a method) of this
        file hold events? Judged on its text before the file is parsed (`acting`)."""
        if not self.has_events(path):
            return False
        names = self._acting_of(path)
        return name in names or prefix and any(n.startswith(name + ".") for n in names)

    def may_act_any(self, path: Path) -> bool:
        """Has this file any function or method that may act?"""
        found = self._any.get(path)
        if found is None:
            found = self._any[path] = self.has_events(path) and bool(self._acting_of(path))
        return found

    def _acting_of(self, path: Path) -> frozenset[str]:
        text, digest = self._texts[path]  # type: ignore[misc]
        found = self._acting.get(digest)
        if found is None:
            found = self._acting[digest] = acting(text)
        return found

    def bases(self, path: Path, cls_name: str) -> list[str]:
        """The bases a class of this file names (from its text), or []."""
        got = self.text(path)
        if got is None:
            return []
        index = self._classes.get(got[1])
        if index is None:
            index = self._classes[got[1]] = {
                m.group(1): [b.strip() for b in m.group(2).split(",") if b.strip()]
                for m in _CLASS_LINE.finditer(got[0])
            }
        return index.get(cls_name, [])

    def _exports_path(self, digest: str) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / "exports" / EXPORTS_VERSION / digest[:2] / f"{digest}.json"

    def _load(self, digest: str) -> Exports | None:
        target = self._exports_path(digest)
        if target is None:
            return None
        try:
            return Exports.from_json(target.read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _store(self, digest: str, exports: Exports) -> None:
        target = self._exports_path(digest)
        if target is None:
            return
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(exports.to_json(), encoding="utf-8")
            os.replace(tmp, target)
        except OSError:
            pass

    def display(self, path: Path) -> str:
        """A project file's path as messages and the cache show it: relative to the root, with `/`."""
        found = self._shown.get(path)
        if found is None:
            found = self._shown[path] = os.path.relpath(str(path), str(self.root)).replace(os.sep, "/")
        return found

    def view(self, path: str | Path, text: str) -> "ProjectView | None":
        """What one file may read of the project; None when it calls nothing of the project that can hold events
        (then the file is checked exactly as alone). The files it looked at are kept in `reads`, either way (all
        views of the file together: a notebook's check may view it twice)."""
        file = Path(path).resolve()
        bound = scan_imports(text)
        view = ProjectView(self, file, bound, self.reads.setdefault(file, {}))
        if not bound:
            return None
        return view if view.relevant(text) else None


def _tried(folder: str, parts: list[str]) -> tuple[str, ...]:
    """The files `module_file` looks for in `folder` for the module's last part (`parts`), in its order."""
    if not parts:
        return (os.path.join(folder, "__init__.py"),)
    return (os.path.join(folder, parts[-1] + ".py"), os.path.join(folder, parts[-1], "__init__.py"))


def acting(text: str) -> frozenset[str]:
    """The functions (`f`) and methods (`Class.method`) of a file whose code, or the code of the file's functions
    (or the class's methods) they call, holds event text: the only ones a caller in another file gains events
    from. Read from the text with docstrings and comments dropped; only these are exported."""
    index = _definitions(text)
    classes = {name.split(".", 1)[0] for name in index if "." in name}
    out = set()
    for name, piece in index.items():
        if name in classes:
            continue  # a class acts through its methods
        if EVENT_TEXT.search(piece) or any(EVENT_TEXT.search(index[c]) for c in _called_names(piece)
                                           if c in index and c != name):
            out.add(name)
        elif "." in name:
            cls = name.split(".", 1)[0]
            if any(EVENT_TEXT.search(index.get(f"{cls}.{m}", "")) for m in _self_calls(piece)):
                out.add(name)
    return frozenset(out)


def _definitions(text: str) -> dict[str, str]:
    """The text of each top-level function and class (`name`) and of each method (`Class.method`), split at lines
    by indentation: a cheap superset, only used to decide whether a file is worth parsing."""
    out: dict[str, str] = {}
    lines = text.splitlines(keepends=True)
    top: list[tuple[str, int]] = []  # (qualified name, first line)
    methods: list[tuple[str, int, int]] = []  # (qualified name, first line, indent)
    for i, line in enumerate(lines):
        m = _DEF_LINE.match(line)
        if m is None:
            continue
        indent, kind, name = len(m.group(1).expandtabs()), m.group(2), m.group(3)
        if indent == 0:
            top.append((name, i))
        elif kind == "def" and top and lines[top[-1][1]].lstrip().startswith("class"):
            methods.append((f"{top[-1][0]}.{name}", i, indent))
    starts = [i for i, line in enumerate(lines) if line[:1] not in ("", " ", "\t", "\n", "\r", "#", ")", "]", "}")]
    for name, first in top:
        end = next((s for s in starts if s > first and not lines[s].startswith(("@", "else", "elif", "except",
                                                                               "finally"))), len(lines))
        out[name] = _code_only("".join(lines[first:end]))
    for name, first, indent in methods:
        end = first + 1
        while end < len(lines):
            line = lines[end]
            stripped = line.strip()
            if stripped and not stripped.startswith("#") and len(line) - len(line.lstrip()) <= indent and not \
                    stripped.startswith((")", "]", "}")):
                break
            end += 1
        out[name] = _code_only("".join(lines[first:end]))
    return out


def _code_only(text: str) -> str:
    """Without docstrings and comments (whose `.backward()` examples are not calls): a cheap approximation."""
    return _COMMENT.sub("", _TRIPLE.sub("", text))


def _self_calls(text: str) -> set[str]:
    return {m.group(1) for m in _SELF_CALL.finditer(text)}


def _called_names(text: str) -> set[str]:
    return {m.group(1) for m in _BARE_CALL.finditer(text)}


_TRIPLE = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'')
_COMMENT = re.compile(r"#[^\n]*")
_CLASS_LINE = re.compile(r"(?m)^class[ \t]+(\w+)[ \t]*\(([^)]*)\)")
_DEF_LINE = re.compile(r"([ \t]*)(?:async[ \t]+)?(def|class)[ \t]+(\w+)")
_BARE_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*\(")
_SELF_CALL = re.compile(r"\bself\s*\.\s*([A-Za-z_]\w*)\s*\(")
_CLASS_BASES = re.compile(r"(?m)^[ \t]*class[ \t]+\w+[ \t]*\(([^)]*)\)")


class ProjectView:
    """The project as one file sees it: its imports resolved to the exports of other files."""

    def __init__(self, project: Project, file: Path, bound: dict[str, Imported],
                 reads: dict[str, Path] | None = None) -> None:
        self.project = project
        self.file = file
        self.bound = bound
        # every project file it looked at, or looked for and did not find: as displayed -> path
        self.reads: dict[str, Path] = {} if reads is None else reads
        self.text = ""  # the events' text of the callees the file may reach (for the prefilter)
        self.stand_ins: dict[str, str] = {}  # a called name (`train_step`, `engine.run`, `self.fit`) -> its events' text
        self._recorders: list[dict[str, Path]] = [self.reads]
        self._dir = os.path.dirname(str(file))

    def relevant(self, text: str) -> bool:
        """Does the file call (or inherit) something of a project file that holds events? Also gathers the
        callees' event text for the prefilter. Only names bound to files whose text can hold events are looked
        for in the file's text: the rest of the imports cost a dictionary lookup."""
        all_bases = [b.strip() for m in _CLASS_BASES.finditer(text) for b in m.group(1).split(",") if b.strip()]
        base_heads = {b.split(".", 1)[0] for b in all_bases}
        # A class brings events only to a subclass (`self.fit()` inherited); a function or module to its calls.
        wanted = [local for local, imp in self.bound.items()
                  if (local in base_heads or not local[:1].isupper()) and self._eventful(imp)]
        if not wanted:
            return False
        alternatives = "|".join(re.escape(w) for w in sorted(wanted, key=len, reverse=True))
        pattern = re.compile(rf"(?<![\w.])(?:{alternatives})(?:\s*\.\s*[A-Za-z_]\w*)*(?=\s*\()")
        called = sorted({re.sub(r"\s+", "", m.group(0)) for m in pattern.finditer(text)})
        for name in called:
            found = self.function(name)
            if found is not None:
                self.stand_ins[name] = _event_text(found.export)
        bases = [b for b in all_bases if b.split(".", 1)[0] in wanted]
        if bases:
            for name in sorted({m.group(1) for m in _SELF_CALL.finditer(text)}):
                found = self.method(bases, name)
                if found is not None:
                    self.stand_ins[f"self.{name}"] = _event_text(found.export)
        self.text = "\n".join(p for p in self.stand_ins.values() if p)
        return bool(self.text)

    def _eventful(self, imp: Imported) -> bool:
        """Can what this import binds hold events: a function or class of a project file that may act, or a
        module of the project (`import engine`, `from . import utils`: which of its functions a call reaches is
        known from the call)?"""
        module = self._path(imp.module, imp.level)
        if imp.name is None:
            # `import engine`: a module with functions that may act; `import pkg.engine`: the same of pkg/engine.py
            paths = [module] + [self._path(f"{imp.module}.{sub}", 0) for sub in imp.subs]
            return any(p is not None and self.project.may_act_any(p) for p in paths)
        if module is not None and self.project.may_act(module, imp.name, prefix=True):
            return True
        if imp.name[:1].islower():
            sub = self._path(".".join(p for p in (imp.module, imp.name) if p), imp.level)
            return sub is not None and self.project.may_act_any(sub)
        return False

    def modules(self) -> set[str]:
        """Local names that may be bound to modules (`import engine`, `from . import utils`): calls through them
        (`engine.train(...)`) are worth resolving."""
        return {k for k, v in self.bound.items() if v.name is None or v.name[:1].islower()}

    def _path(self, module: str, level: int) -> Path | None:
        project = self.project
        key = (self._dir, module, level)
        path = project._modules.get(key, False)
        if path is False:
            path = project.module_file(self.file, Imported(module, level))
        for looked in project._candidates[key]:  # the file found, and those looked for before it
            shown = project._shown.get(looked) or project.display(looked)
            for reads in self._recorders:
                reads[shown] = looked
        return path

    def _memo(self, key: tuple, compute):
        """`compute()` once per project for files of the same directory (what an import means depends only on
        the importer's directory), replaying the files it read into this file's `reads`."""
        memo = self.project._lookups
        hit = memo.get(key)
        if hit is None:
            recorded: dict[str, Path] = {}
            self._recorders.append(recorded)
            try:
                value = compute()
            finally:
                self._recorders.pop()
            hit = memo[key] = (value, recorded)
        for reads in self._recorders:  # this file's `reads` first, then any lookup that called this one
            reads.update(hit[1])
        return hit[0]

    def _target(self, dotted: str) -> tuple[Path, str] | None:
        """The project file and the name in it (`f`, `Class`) that `dotted` refers to through an import."""
        head, _, rest = dotted.partition(".")
        imp = self.bound.get(head)
        if imp is None:
            return None
        if imp.name is not None and not rest:
            path = self._path(imp.module, imp.level)
            if path is not None:
                return path, imp.name
            return None
        # `engine.train`, `pkg.engine.train`, `from . import utils` then `utils.train`
        if not rest:
            return None
        *subs, name = rest.split(".")
        module = ".".join(p for p in (imp.module, imp.name or "", *subs) if p)
        path = self._path(module, imp.level)
        return (path, name) if path is not None else None

    def function(self, dotted: str) -> Resolved | None:
        """The function of another project file that `dotted(...)` calls, when it can hold events."""
        head, _, rest = dotted.partition(".")
        imp = self.bound.get(head)
        if imp is None:
            return None
        found = self._memo(("function", self._dir, imp, rest), lambda: self._function(dotted))
        return None if found is None or found.path == self.project.display(self.file) else found

    def _function(self, dotted: str) -> Resolved | None:
        target = self._target(dotted)
        if target is None or not self.project.may_act(*target):
            return None
        path, name = target
        exports = self.project.exports(path)
        if exports is None or name not in exports.functions:
            return None
        return Resolved(exports.functions[name], self.project.display(path), name)

    def method(self, bases: list[str], name: str) -> Resolved | None:
        """`self.name(...)` in a class with these bases (dotted, as written in this file): the method of a base
        class defined in another project file (or of that class's own bases in its file)."""
        for base in bases:
            target = self._target(base)
            if target is None:
                continue
            path, cls_name = target
            exports = None
            for owner in self._lineage(path, cls_name):
                if not self.project.may_act(path, f"{owner}.{name}"):
                    continue
                exports = exports or self.project.exports(path)
                if exports is not None and name in exports.classes.get(owner, {}):
                    return Resolved(exports.classes[owner][name], self.project.display(path), name)
        return None

    def _lineage(self, path: Path, cls_name: str) -> list[str]:
        """The class and the bases it names that are defined in the same file, nearest first (from its text)."""
        out, todo = [], [cls_name]
        while todo and len(out) < 8:
            name = todo.pop(0)
            if name not in out:
                out.append(name)
                todo.extend(b for b in self.project.bases(path, name) if b.isidentifier())
        return out

    def module_base(self, base: str) -> bool:
        """Is `base` a class of another project file that derives from nn.Module (read from its file's text)?"""
        target = self._target(base)
        if target is None:
            return False
        return any(b.rsplit(".", 1)[-1] in MODULE_BASES
                   for name in self._lineage(*target) for b in self.project.bases(target[0], name))


def _event_text(exp: FunctionExport) -> str:
    """Text standing for a callee's events, for the prefilter: `.backward(`, `.step(` ..."""
    words = {
        "backward": ".backward(", "step": ".step(", "zero_grad": "zero_grad(", "scheduler_step": ".step(",
        "clip_grad": "clip_grad_norm_(", "scaler_update": ".update(", "scaler_unscale": ".unscale_(",
    }
    out = [words[e.kind] for e in exp.events if e.kind in words]
    if exp.trains or exp.steps:
        out.append(".step(")
    if exp.zeroes:
        out.append("zero_grad(")
    return " ".join(dict.fromkeys(out))


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


def compute_exports(text: str, names: frozenset[str]) -> Exports | None:
    """Parse one file and summarise its functions and classes for callers in other files."""
    import libcst as cst

    from torchlint.analysis.model import FileModel

    from torchlint.pipeline.prune import prune

    try:
        # Only what can act is parsed: the other functions are blanked (their lines kept), as for linting.
        source = prune(text, [(EVENT_TEXT,)])
        module = cst.parse_module(source)
        model = FileModel(module, source)
        return export(model, names)
    except Exception:  # a file we cannot analyse is not followed: its callers stay as silent as before
        return None


def export(model, names: frozenset[str]) -> Exports:
    """The exports of an analysed file (`FileModel`): its functions and methods among `names` (`acting`)."""
    import libcst as cst

    from torchlint.analysis.exprs import positional_params
    from torchlint.pipeline.positions import positions

    scopes = [s for s in model.scopes if isinstance(s.node, cst.FunctionDef) and "." not in s.name
              and (f"{s.class_name}.{s.name}" if s.class_name else s.name) in names]
    wanted = []
    for scope in scopes:
        wanted.append(scope.node)
        for e in scope.events:
            if e.kind in _EXPORTED_KINDS and e.scope is scope.node:
                wanted.append(e.node)
    where = positions(model.module, model.text, wanted, model.top_of) if wanted else {}

    def line(node) -> int:
        rng = where.get(node)
        return rng.start.line if rng is not None else 0

    def fn(scope) -> FunctionExport:
        summary = model.summary(scope)
        events = []
        for e in scope.events:
            if e.kind not in _EXPORTED_KINDS:
                continue
            if summary.trains and e.loops:
                continue  # a run of its own: callers see it as one RUN event
            if e.guards and e.kind is not EventKind.ZERO_GRAD:
                continue  # guarded inside the callee: when it runs is not known to the caller
            at = line(e.node if e.scope is scope.node else scope.node)
            events.append(ExportedEvent(e.kind.value, e.target, e.flavor, e.via, at, tuple(e.contexts)))
        params = positional_params(scope.node)
        handed = _handed(model, scope, set(params) | {"self"})
        try:
            returns = model.kinds.returns(scope).name
        except Exception:
            returns = "UNKNOWN"
        return FunctionExport(
            line(scope.node), params, summary.trains, sorted(summary.steps), events,
            bool(summary.zeroes) or any(e.kind is EventKind.ZERO_GRAD for e in scope.events), handed, returns,
        )

    out = Exports()
    for scope in scopes:
        if scope.class_name is None:
            out.functions[scope.name] = fn(scope)
    for name in model.classes:
        methods = {s.name: fn(s) for s in scopes if s.class_name == name}
        if methods:
            out.classes[name] = methods
    return out


def _handed(model, scope, params: set[str]) -> list[str]:
    """The parameters (and `self`) that the function hands to calls the model cannot follow: an unresolved
    function or inherited method, or a method of another object (`engine.run(optimizer)`)."""
    import libcst as cst

    from torchlint.analysis.exprs import dotted
    from torchlint.analysis.model import _tracked
    from torchlint.analysis.walk import calls_in_evaluation_order

    calls = [e.node for e in scope.events if e.kind is EventKind.OPAQUE and isinstance(e.node, cst.Call)]
    handed: set[str] = set()
    for e in scope.events:
        if e.kind is EventKind.OPAQUE and (e.callee or "").startswith("self."):
            handed.add("self")
    for stmt in scope.body:
        calls.extend(c for c in calls_in_evaluation_order(stmt) if isinstance(c.func, cst.Attribute) and not _tracked(c))
    for call in calls:
        for a in call.args:
            name = dotted(a.value)
            if name is not None and name.split(".", 1)[0] in params:
                handed.add(name.split(".", 1)[0])
    return sorted(handed)
