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
- They are cached by content hash (in memory, and on disk beside the results): a file imported by twenty is parsed once.
- A file is only followed when its text can hold events at all (a backward, a step, a zero_grad ...): the rest of
  a project (models, data, utilities) costs one text search, never a parse.
- Every project file a check looked at, and every file an import was looked for at and not found, is recorded
  (`ProjectView.reads`); the cache keeps their hashes with the result, which is valid only while those files are
  unchanged (and the missing ones still missing).

Imports are read from the text (`scan_imports`), before parsing: the prefilter needs to know whether a file that
holds no training events itself calls a helper that does. (The reverse, callers: `project_callers`.)"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from torchlint.analysis.exports import compute_exports
from torchlint.analysis.foreign import Exports, Resolved, Signature, event_text
from torchlint.analysis.prescan import (
    CLASS_LINE, EVENT_BYTES, EVENT_TEXT, OBJECT_CALL, SELF_CALL, Imported, acting, class_bases, inert,
    scan_imports, star_imports, top_level_names,
)
from torchlint.project_callers import CallersIndex
from torchlint.project_values import Kept, OtherFilesValues
from torchlint.source.decode import SourceError, decode
from torchlint.source.digest import content_hash
from torchlint.project_text import SignatureReader, rate_setter
from torchlint.source.safe_read import read_regular

EXPORTS_VERSION = "10"  # bumped when what `Exports.to_json` writes changes


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
        self._inert: dict[str, frozenset[str]] = {}  # by content hash: `inert`
        self._eventful: dict[Path, bool] = {}  # has_events
        self._any: dict[Path, bool] = {}  # may_act_any
        self._modules: dict[tuple[str, str, int], Path | None] = {}  # module_file
        # module_file: each file it looked for up to the one found, present or not (creating one changes the answer)
        self._candidates: dict[tuple[str, str, int], tuple[str, ...]] = {}  # the paths module_file looked at
        self._candidates_shown: dict[tuple[str, str, int], list[tuple[str, str]]] = {}  # _candidates, displayed
        self._lookups: dict[tuple, tuple[object, dict[str, Path | str]]] = {}  # ProjectView._memo
        self._dirs: dict[str, frozenset[str]] = {}  # directory listings
        self._shown: dict[Path, str] = {}  # display
        self._root_prefix = str(self.root).rstrip(os.sep) + os.sep
        self._classes: dict[str, dict[str, list[str]]] = {}  # by content hash: each class's bases, as written
        self.reads: dict[Path, dict[str, Path | str]] = {}  # for each file viewed: the project files it looked at
        self.signatures, self.callers_index = SignatureReader(self), CallersIndex(self)  # instance_call, callers

    # -- files -----------------------------------------------------------------------------------------------
    def text(self, path: Path, data: bytes | None = None) -> tuple[str, str] | None:
        """(text, content hash) of a project file (from `data` when its bytes were just read); None if unreadable."""
        if path in self._texts:
            return self._texts[path]
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
            # Python's order within one entry: a package (`engine/__init__.py`) before a module (`engine.py`); a
            # directory without __init__.py is a namespace portion, which only counts when no entry has either.
            if parts and parts[-1] in names and "__init__.py" in self._listing(os.path.join(here, parts[-1])):
                found = os.path.join(here, parts[-1], "__init__.py")
            elif parts and parts[-1] + ".py" in names:
                found = os.path.join(here, parts[-1] + ".py")
            elif not parts and "__init__.py" in names:
                found = os.path.join(here, "__init__.py")
            if found is not None:
                break
        result = Path(found) if found is not None and found.startswith(self._root_prefix) else None
        self._modules[key] = result
        self._candidates[key] = tuple(p for p in looked if p.startswith(self._root_prefix))
        self._candidates_shown.pop(key, None)
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
            found = self._eventful[path] = (EVENT_BYTES.search(data) is not None
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

    def inert(self, path: Path, name: str) -> bool:
        """Is `name` a function of this file that can neither act nor clear gradients (`prescan.inert`)?"""
        got = self.text(path)
        if got is None:
            return False
        text, digest = got
        found = self._inert.get(digest)
        if found is None:
            found = self._inert[digest] = inert(text)
        return name in found

    def _acting_of(self, path: Path) -> frozenset[str]:
        text, digest = self._texts[path]  # type: ignore[misc]  # every caller found the text first: not None
        found = self._acting.get(digest)
        if found is None:
            found = self._acting[digest] = acting(text)
        return found

    def bases(self, path: Path, cls_name: str) -> list[str]:
        """The bases a class of this file names (from its text), or []."""
        return self.class_bases(path, cls_name) or []

    def class_bases(self, path: Path, cls_name: str) -> list[str] | None:
        """The bases a top-level class of this file names (from its text; [] for `class C:`); None if no such class."""
        got = self.text(path)
        if got is None:
            return None
        index = self._classes.get(got[1])
        if index is None:
            index = self._classes[got[1]] = {
                m.group(1): [b.strip() for b in (m.group(2) or "").split(",") if b.strip()]
                for m in CLASS_LINE.finditer(got[0])
            }
        return index.get(cls_name)

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
        for star in star_imports(text):
            view.import_all(star)
        if not bound:
            return None
        return view if view.relevant(text) else None

    def classes_view(self, path: str | Path, text: str, called: bool = False) -> "ClassesOnly | None":
        """For a file whose `view` is None: what its imported classes are, and its helpers' `called` callers."""
        bound = scan_imports(text)
        stars = star_imports(text)
        if not bound and not stars and not called:
            return None
        file = Path(path).resolve()
        view = ProjectView(self, file, bound, self.reads.setdefault(file, {}))
        for star in stars:
            view.import_all(star)
        return ClassesOnly(view)


_STEP_TEXT = re.compile(r"\.\s*step\s*\(")


def _tried(folder: str, parts: list[str]) -> tuple[str, ...]:
    """The files `module_file` looks for in `folder` for the module's last part (`parts`), in its order."""
    return (os.path.join(folder, "__init__.py"),) if not parts else (
        os.path.join(folder, parts[-1], "__init__.py"), os.path.join(folder, parts[-1] + ".py"))


class ProjectView(OtherFilesValues):
    """The project as one file sees it: its imports resolved to the exports of other files (and, parsed when
    asked, what other files' functions return and their classes' methods keep: `OtherFilesValues`)."""

    def __init__(self, project: Project, file: Path, bound: dict[str, Imported],
                 reads: dict[str, Path | str] | None = None) -> None:
        self.project: Project = project
        self.file = file
        self.bound = bound
        # every project file it looked at, or looked for and did not find: as displayed -> path
        self.reads: dict[str, Path | str] = {} if reads is None else reads
        self.text = ""  # the events' text of the callees the file may reach (for the prefilter)
        self.star_bound: set[str] = set()  # the names `import *` of a project file binds (import_all)
        self.stand_ins: dict[str, str] = {}  # a called name (`train_step`, `engine.run`, `self.fit`) -> its events' text
        self._recorders: list[dict[str, Path | str]] = [self.reads]
        self._dir = os.path.dirname(str(file))

    def import_all(self, star: Imported) -> None:
        """`from utils import *`: the functions and classes a project file defines at its top level, bound as if
        imported by name (where no import of the file binds them already; a name the importing file defines itself
        is its own, whatever is bound)."""
        path = self._path(star.module, star.level)
        if path is None or path == self.file:
            return
        got = self.project.text(path)
        if got is None:
            return
        if self.project.has_events(path):
            for name in top_level_names(got[0]):
                if name not in self.bound:
                    self.bound[name] = Imported(star.module, star.level, name)
                    self.star_bound.add(name)
        # What the file itself imports by name is bound too (`from . import *` of a package whose `__init__.py`
        # re-exports `from ..utils.metrics import BatchMeter`): as written there, when it means the same here (an
        # absolute import, or a relative one from a file of this file's folder).
        same_folder = os.path.dirname(str(path)) == self._dir
        for name, imported in scan_imports(got[0]).items():
            if name not in self.bound and imported.name is not None and (imported.level == 0 or same_folder):
                self.bound[name] = imported
                self.star_bound.add(name)

    def star_names(self) -> frozenset[str]:
        """The names `import *` of project files binds in the file (`import_all`)."""
        return frozenset(self.star_bound)

    def relevant(self, text: str) -> bool:
        """Does the file call (or inherit) something of a project file that holds events, or, where it steps
        an optimizer, a function of a project module that cannot touch gradients (`utils.clip(optimizer, 5)`:
        known not to clear them)?"""
        return self._acting_calls(text) or self._inert_calls(text)

    def _inert_calls(self, text: str) -> bool:
        if _STEP_TEXT.search(text) is None:
            return False
        modules = sorted(self.modules(), key=len, reverse=True)
        if not modules:
            return False
        alternatives = "|".join(re.escape(m) for m in modules)
        pattern = re.compile(rf"(?<![\w.])(?:{alternatives})(?:\s*\.\s*[A-Za-z_]\w*)+(?=\s*\()")
        return any(self.inert(name) for name in sorted({re.sub(r"\s+", "", m.group(0))
                                                        for m in pattern.finditer(text)}))

    def _acting_calls(self, text: str) -> bool:
        """Does the file call (or inherit) something of a project file that holds events? Also gathers the
        callees' event text for the prefilter. Only names bound to files whose text can hold events are looked
        for in the file's text: the rest of the imports cost a dictionary lookup."""
        all_bases = [b.strip() for listed in class_bases(text) for b in listed.split(",") if b.strip()]
        base_heads = {b.split(".", 1)[0] for b in all_bases}
        # A class brings events to a subclass (`self.fit()` inherited) and to the objects the file builds of it
        # (`trainer = Trainer(...)`, then `trainer.fit()`); a function or module to its calls.
        # constructed somewhere in the text (`Trainer(`; a superset, found by substring searches, which are cheap),
        # asked first of the capitalised names only (a lower-case one counts anyway, and is asked once wanted)

        def built(local: str) -> bool:
            return local not in base_heads and (f"{local}(" in text or f"{local} (" in text)
        wanted = [local for local, imp in self.bound.items()
                  if self._eventful(imp) and (local in base_heads or not local[:1].isupper() or built(local))]
        if not wanted:
            return False
        alternatives = "|".join(re.escape(w) for w in sorted(wanted, key=len, reverse=True))
        pattern = re.compile(rf"(?<![\w.])(?:{alternatives})(?:\s*\.\s*[A-Za-z_]\w*)*(?=\s*\()")
        called = sorted({re.sub(r"\s+", "", m.group(0)) for m in pattern.finditer(text)})
        for name in called:
            found = self.function(name)
            if found is not None:
                self.stand_ins[name] = event_text(found.export)
        bases = [b for b in all_bases if b.split(".", 1)[0] in wanted]
        if bases:
            for name in sorted({m.group(1) for m in SELF_CALL.finditer(text)}):
                found = self.method(bases, name)
                if found is not None:
                    self.stand_ins[f"self.{name}"] = event_text(found.export)
        classes = [c for c in wanted if built(c)]
        for cls in classes:
            # `model = Seq2Seq(...)`, then `model(x)`: calling a module runs its forward
            found = self.method([cls], "forward")
            if found is not None:
                self.stand_ins[cls] = event_text(found.export)
        if classes:
            calls: dict[str, set[str]] = {}
            for m in OBJECT_CALL.finditer(text):
                calls.setdefault(m.group(2), set()).add(re.sub(r"\s+", "", m.group(1)))
            for name, receivers in sorted(calls.items()):
                found = self.method(classes, name)
                if found is not None:
                    for receiver in sorted(receivers):
                        self.stand_ins[f"{receiver}.{name}"] = event_text(found.export)
        self.text = "\n".join(p for p in self.stand_ins.values() if p)
        return bool(self.text)

    def _eventful(self, imp: Imported) -> bool:
        return self._memo(("eventful", self._dir, imp), lambda: self._eventful_uncached(imp))

    def _eventful_uncached(self, imp: Imported) -> bool:
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
        """Names that may be bound to modules (`import engine`, `from . import utils`): worth resolving calls of."""
        return {k for k, v in self.bound.items() if v.name is None or v.name[:1].islower()}

    def module_files(self) -> set[str]:
        """Of `modules()`, the names whose import is a file of the project (`ProjectLookup.module_files`)."""
        return {k for k in self.modules() if self._target(f"{k}._") is not None}  # the file a call `k._(...)` reaches

    def _path(self, module: str, level: int) -> Path | None:
        project = self.project
        key = (self._dir, module, level)
        path: Path | None | Literal[False] = project._modules.get(key, False)
        if path is False:
            path = project.module_file(self.file, Imported(module, level))
        shown = project._candidates_shown.get(key)
        if shown is None:  # the file found, and those looked for before it, as the cache names them
            cut = len(project._root_prefix)
            shown = project._candidates_shown[key] = [(p[cut:].replace(os.sep, "/"), p)
                                                      for p in project._candidates[key]]
        for reads in self._recorders:
            reads.update(shown)
        return path

    def _memo(self, key: tuple, compute):
        """`compute()` once per project for files of the same directory (what an import means depends only on
        the importer's directory), replaying the files it read into this file's `reads`."""
        memo = self.project._lookups
        hit = memo.get(key)
        if hit is None:
            recorded: dict[str, Path | str] = {}
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

    def inert(self, dotted: str) -> bool:
        """Does `dotted(...)` call a function of another project file that can neither act nor clear gradients
        (`utils.clip_gradient(optimizer, 5)`)?"""
        head, _, rest = dotted.partition(".")
        imp = self.bound.get(head)
        if imp is None:
            return False

        def compute() -> bool:
            target = self._target(dotted)
            return target is not None and not self.project.may_act(*target) and self.project.inert(*target)

        return bool(self._memo(("inert", self._dir, imp, rest), compute))

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

    def rate_setter(self, dotted: str) -> bool:
        """Is `dotted` a scheduler class of another project file, or a function there that builds only such classes
        (`project_text.rate_setter`)? Read from its file's text."""
        target = self._target(dotted)
        return target is not None and rate_setter(self.project, self.project.signatures, *target)

    def _record(self, path: Path) -> None:
        for reads in self._recorders:
            reads[self.project.display(path)] = path


class ClassesOnly:
    """A `ProjectLookup` for a file that calls nothing of the project that can hold events: it reaches no other
    file's functions or methods, and answers what other files' classes are, keep, return and run when called."""

    def __init__(self, view: ProjectView) -> None:
        self._view = view
        self.detaches, self.instance_returned = view.detaches, view.instance_returned
        self.passed_on, self.kept_in = view.passed_on, view.kept_in
        self.function_passed_on, self.steps_clipping = view.function_passed_on, view.steps_clipping
        self.callers, self.runs = view.callers, view.runs  # what the project's files do with this file's helpers

    def modules(self) -> set[str]:
        return set()

    def module_files(self) -> set[str]:
        return set()

    def function(self, dotted: str) -> Resolved | None:
        return None

    def inert(self, dotted: str) -> bool:
        return False

    def star_names(self) -> frozenset[str]:
        return self._view.star_names()  # (what `import *` binds: its classes are asked of the view)

    def method(self, bases: list[str], name: str) -> Resolved | None:
        return None

    def module_base(self, base: str) -> bool:
        return self._view.module_base(base)

    def kept(self, cls: str, method: str) -> Kept | None:
        return self._view.kept(cls, method)

    def imports_project_files(self) -> bool:
        return self._view.imports_project_files()

    def returned(self, dotted: str) -> Resolved | None:
        return self._view.returned(dotted)

    def rate_setter(self, dotted: str) -> bool:
        return self._view.rate_setter(dotted)

    def instance_call(self, dotted: str, forward: Signature | None) -> Signature | None:
        return self._view.instance_call(dotted, forward)

    def function_call(self, name: str) -> Signature | None:
        return self._view.function_call(name)
