"""What the values a file hands to, or gets from, another project file's code become, parsed only when asked
(`ProjectView` answers with `OtherFilesValues`):

- `kept`: what a method of another file's class keeps of its arguments, a meter's `update(val)` that adds `val`
  into `self.sum`, a collector's `__setitem__` that appends its value to a list of `self`; asked for the loops of
  a file that back-propagate, of the classes its objects are built from, and parsed only when the class's file
  holds such a write (a text search first);
- `returned`: what a function of another file that cannot act returns (a loss function's `(loss, parts)`), per
  element of a returned tuple; asked only by a function that back-propagates;
- `instance_returned`: what a method of the object another file's class or factory makes returns (calling a loss
  object `self.loss_fn(...)` built by `create_loss(...) -> DualLoss`), per element of a returned tuple and the
  values of a returned dict; asked only by a function that back-propagates;
- `detaches`: whether a method of another file's class (`detach()`) cuts the state its object keeps from the
  graph; asked only for a class of the viewing file that overrides it with a body that does nothing;
- `steps_clipping`: whether an optimizer class's own `step()` clips the gradients; asked only by TL005, for an
  optimizer a summed window steps;
- `passed_on`: which arguments a method of the object another file's class or factory makes never back-propagates
  (`meter.update(total)` that stores it); asked only by TL007 for a running total handed to it (`handing`).

Each file is parsed once per content (in memory); the files looked at are recorded in the view's `reads`. A
project that reads only cached exports (the flake8 plugin, the language server) parses nothing here."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from torchlint.analysis.exports import export
from torchlint.analysis.exprs import positional_params
from torchlint.analysis.handing import passive_params
from torchlint.analysis.bindings import step_clips
from torchlint.analysis.foreign import CallerUse, FunctionExport, Resolved, Signature
from torchlint.analysis.model import FileModel
from torchlint.analysis.prescan import Imported
from torchlint.analysis.semantics import MODULE_BASES
from torchlint.analysis.overrides import detaches_state, method_of
from torchlint.project_trees import tree_of
from torchlint.source.cstfast import parse_read_only

# `self.sum +=`, `self.sums[i] +=`, `self.values.append(`, `self.stats[key].append(`: a write that keeps its value
KEEPING_TEXT = re.compile(r"self\s*\.\s*\w+(?:\s*\[[^\]\n]*\])?\s*(?:\+=|\.\s*(?:append|extend)\s*\()")

# the method's positional parameters (`self` included), and those it keeps in an attribute of `self`
Kept = tuple[tuple[str, ...], frozenset[str]]

# the method's positional parameters (`self` included), and those it never back-propagates
Passed = tuple[tuple[str, ...], frozenset[str]]

_HOPS = 4  # imports followed from a factory to the class it makes
_LIMIT = 4096  # entries kept per memo (a language server runs long)
_KEPT: dict[tuple[str, tuple[str, ...], str], Kept | None] = {}  # by content hash, class lineage, method
_RETURNED: dict[tuple[str, str], FunctionExport | None] = {}  # by content hash, function
_INSTANCE: dict[tuple[str, tuple[str, ...], str], FunctionExport | None] = {}  # by content hash, lineage, method
_PASSED: dict[tuple[str, tuple[str, ...], str], Passed | None] = {}  # by content hash, class lineage, method
_DETACHES: dict[tuple[str, tuple[str, ...], str], bool] = {}  # by content hash, class lineage, method
_CLIPS: dict[tuple[str, tuple[str, ...], str], bool] = {}  # by content hash, class lineage, "step"
_MODELS: dict[str, FileModel | None] = {}  # by content hash: the last few files parsed


class OtherFilesValues:
    """The part of `ProjectView` that answers `kept`, `returned`, `passed_on` ... (see the module's docstring)."""

    project: Any  # the `Project`: its `text(path)`, `display(path)` and `cached_only` are read here
    file: Path  # the viewing file
    bound: dict  # the names the file's imports bind (`prescan.Imported` each)
    _dir: str  # the viewing file's folder
    _files_imported: bool | None = None

    def _target(self, dotted: str) -> tuple[Path, str] | None:
        raise NotImplementedError

    def _record(self, path: Path) -> None:
        raise NotImplementedError

    def callers(self, name: str) -> tuple[CallerUse, ...]:
        """The calls of the viewing file's `name` (`Class.name`) in the files near it (`project_callers`), whose
        files are recorded in the view's `reads`; none for a project that reads only cached exports, nor for a
        file the pipeline did not ask the callers for (`callers_text`)."""
        if self.project.cached_only:
            return ()
        return self.project.callers_index.answer(self.file, name, self._record)

    def runs(self, name: str) -> tuple[CallerUse, ...]:
        """The calls of the viewing file's method `Class.name` on an instance of the class in the project's files
        (`project_runs`), whose files are recorded in the view's `reads`; none for a project that reads only cached
        exports."""
        if self.project.cached_only:
            return ()
        return self.project.callers_index.runs.runs(self.file, name, self._record)

    def _lineage(self, path: Path, cls_name: str) -> list[str]:
        """The class and the bases it names that are defined in the same file, nearest first (from its text)."""
        out: list[str] = []
        todo = [cls_name]
        while todo and len(out) < 8:
            name = todo.pop(0)
            if name not in out:
                out.append(name)
                todo.extend(b for b in self.project.bases(path, name) if b.isidentifier())
        return out

    def instance_call(self, dotted: str, forward: Signature | None) -> Signature | None:
        """What calling the object `dotted(...)` gives runs, when a project file defines it (`project_text`)."""
        head, _, rest = dotted.partition(".")
        target = self._target(dotted) if head in self.bound else None
        return None if target is None else self._memo(
            ("instance_call", self._dir, self.bound[head], rest, forward),
            lambda: self.project.signatures.instance_call(*target, forward, self._record))

    def function_call(self, name: str) -> Signature | None:
        """How the function of another project file bound here as `name` may be called (`project_text`)."""
        imported = self.bound.get(name)
        if imported is None or imported.name is None:
            return None
        path = self._path(imported.module, imported.level)
        return None if path is None else self._memo(
            ("function_call", self._dir, imported), lambda: self.project.signatures.function_call(path, imported.name, self._record))

    def module_base(self, base: str) -> bool:
        """Is `base` a class of another project file that derives from nn.Module (read from its file's text)?"""
        target = self._target(base)
        return target is not None and any(b.rsplit(".", 1)[-1] in MODULE_BASES for name in self._lineage(*target)
                                          for b in self.project.bases(target[0], name))

    def _memo(self, key: tuple, compute):
        raise NotImplementedError

    def _path(self, module: str, level: int) -> Path | None:
        raise NotImplementedError

    def imports_project_files(self) -> bool:
        """Does an import of the viewing file name a file of the project (`from utils import Meter`, `import utils`)?
        Without one, `kept` finds no class (once per view)."""
        if self._files_imported is None:
            self._files_imported = any(self._target(name) is not None or self._target(f"{name}._") is not None
                                       for name in self.bound)
        return self._files_imported

    def kept(self, cls: str, method: str) -> Kept | None:
        """`cls.method` of a class of another project file (`cls` as written in the viewing file), defined by the
        class or by one of its bases of that file."""
        target = self._target(cls) if not self.project.cached_only else None  # flake8, the server: parse nothing
        return None if target is None else self._kept_at(target[0], target[1], method)

    def kept_in(self, path: str, cls: str, method: str) -> Kept | None:
        """`cls.method` of the class `cls` of the project file at `path` (a caller's object: `CallerUse.objects`)."""
        if self.project.cached_only:
            return None
        self._record(Path(path))
        return self._kept_at(Path(path), cls, method)

    def _kept_at(self, file: Path, cls: str, method: str) -> Kept | None:
        target = (file, cls)
        got = self.project.text(file)
        if got is None or KEEPING_TEXT.search(got[0]) is None or not _defines(got[0], method):
            return None
        lineage = self._lineage(*target)
        key = (got[1], tuple(lineage), method)
        if key not in _KEPT:
            _room(_KEPT)
            _KEPT[key] = _kept(_model(got), lineage, method)
        return _KEPT[key]

    def detaches(self, cls: str, method: str) -> bool:
        """Does `cls.method` (`cls` a class of another project file, as written in the viewing file; the method
        defined by the class or by one of its bases of that file) cut the state its object keeps from the graph
        (`self.hidden = self.hidden.detach()`, `h.detach_()`)? Read with Python's `ast`, once per content."""
        target = self._target(cls) if not self.project.cached_only else None
        got = self.project.text(target[0]) if target is not None else None
        if target is None or got is None or "detach" not in got[0] or not _defines(got[0], method):
            return False
        lineage = self._lineage(*target)
        key = (got[1], tuple(lineage), method)
        if key not in _DETACHES:
            _room(_DETACHES)
            tree = tree_of(got[1], got[0])
            fn = method_of(tree, lineage, method) if tree is not None else None
            _DETACHES[key] = fn is not None and detaches_state(fn)
        return _DETACHES[key]

    def returned(self, dotted: str) -> Resolved | None:
        """The export of a top-level function of another project file that `dotted(...)` calls, computed from that
        file alone (whatever it does: one that may act is answered by `function` already)."""
        target = self._target(dotted) if not self.project.cached_only else None
        got = self.project.text(target[0]) if target is not None else None
        if target is None or got is None or not _defines(got[0], target[1], top=True):
            return None
        key = (got[1], target[1])
        if key not in _RETURNED:
            _room(_RETURNED)
            _RETURNED[key] = _returned(_model(got), target[1])
        found = _RETURNED[key]
        return Resolved(found, self.project.display(target[0]), target[1]) if found is not None else None

    def instance_returned(self, maker: str, method: str) -> Resolved | None:
        """`method` of the object `maker(...)` gives: `maker` a class of another project file, or a function there
        whose return annotation names a class (of its file, or one it imports from the project); the method
        defined by the class or a base of its file."""
        found_class = self._made_method(maker, method)
        if found_class is None:
            return None
        made, got, lineage = found_class
        key = (got[1], tuple(lineage), method)
        if key not in _INSTANCE:
            _room(_INSTANCE)
            _INSTANCE[key] = _method_export(_model(got), lineage, method)
        found = _INSTANCE[key]
        return Resolved(found, self.project.display(made[0]), method) if found is not None else None

    def passed_on(self, maker: str, method: str) -> Passed | None:
        """`method` of the object `maker(...)` gives (a class of another project file, or a function there whose
        return annotation names one): its positional parameters and those it never back-propagates."""
        found_class = self._made_method(maker, method)
        if found_class is None:
            return None
        _, got, lineage = found_class
        key = (got[1], tuple(lineage), method)
        if key not in _PASSED:
            _room(_PASSED)
            _PASSED[key] = _passed(_model(got), lineage, method)
        return _PASSED[key]

    def steps_clipping(self, maker: str) -> bool:
        """The `step()` of the class `maker(...)` makes (another project file's) calls a clipping function."""
        found_class = self._made_method(maker, "step")
        if found_class is None:
            return False
        _, got, lineage = found_class
        key = (got[1], tuple(lineage), "step")
        if key not in _CLIPS:
            _room(_CLIPS)
            _CLIPS[key] = step_clips(_model(got), lineage)
        return _CLIPS[key]

    def function_passed_on(self, dotted: str) -> Passed | None:
        """A top-level function of another project file that `dotted(...)` calls: its positional parameters and those
        it never back-propagates (`passed_on`, for a plain function: `to_numpy(total)` that detaches what it gets)."""
        target = self._target(dotted) if not self.project.cached_only else None
        got = self.project.text(target[0]) if target is not None else None
        if target is None or got is None or not _defines(got[0], target[1], top=True):
            return None
        key = (got[1], (), target[1])
        if key not in _PASSED:
            _room(_PASSED)
            _PASSED[key] = _passed(_model(got), [None], target[1])  # type: ignore[list-item]  # top level: no class
        return _PASSED[key]

    def _made_method(self, maker: str, method: str) -> tuple[tuple[Path, str], tuple[str, str], list] | None:
        """The class `maker(...)` makes (its file and name), its file's text, and the lineage of classes of that
        file that may define `method`, when that file defines `method` at all."""
        target = self._target(maker) if not self.project.cached_only else None
        made = self._made_class(*target) if target is not None else None
        got = self.project.text(made[0]) if made is not None else None
        if made is None or got is None or not _defines(got[0], method):
            return None
        return made, got, self._lineage(*made)

    def _made_class(self, path: Path, name: str) -> tuple[Path, str] | None:
        """The file and name of the class whose instance `name(...)` of `path` is: the class itself, or the class a
        function's return annotation names, followed through the project's imports (a few hops)."""
        reader = self.project.signatures
        annotated = False
        for _ in range(_HOPS):
            self._record(path)
            got = reader.file(path)
            if got is None:
                return None
            defs, imports = got
            node = defs.get(name)
            if isinstance(node, ast.ClassDef):
                return path, name
            if isinstance(node, ast.FunctionDef) and not annotated:
                ann = node.returns
                if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
                    name = ann.value  # `-> "DualLoss"`
                elif isinstance(ann, ast.Name):
                    name = ann.id
                else:
                    return None
                annotated = True
                continue
            imp = imports.get(name)
            if node is not None or imp is None or imp.name is None:
                return None
            found = self.project.module_file(path, Imported(imp.module, imp.level))
            if found is None:
                return None  # outside the project (`-> nn.Module`)
            path, name = found, imp.name
        return None


def _method_export(model: FileModel | None, lineage: list[str], method: str) -> FunctionExport | None:
    if model is None:
        return None
    try:
        for owner in lineage:
            if any(s.class_name == owner and s.name == method for s in model.scopes):
                return export(model, frozenset({f"{owner}.{method}"})).classes[owner][method]
    except Exception:  # a method that cannot be summarised returns nothing known
        return None
    return None


def _model(got: tuple[str, str]) -> FileModel | None:
    text, digest = got
    if digest not in _MODELS:
        try:
            model: FileModel | None = FileModel(parse_read_only(text), text)
        except Exception:  # a file that cannot be analysed tells nothing
            model = None
        if len(_MODELS) >= 8:
            _MODELS.pop(next(iter(_MODELS)))
        _MODELS[digest] = model
    return _MODELS[digest]


def _defines(text: str, name: str, top: bool = False) -> bool:
    """The text defines a function or method `name` (`top`: at the margin, a function of the module)."""
    indent = "" if top else r"[ \t]*"
    return re.search(rf"(?m)^{indent}(?:async[ \t]+)?def[ \t]+{re.escape(name)}\s*\(", text) is not None


def _room(memo: dict) -> None:
    if len(memo) >= _LIMIT:
        memo.clear()


def _returned(model: FileModel | None, name: str) -> FunctionExport | None:
    try:
        return export(model, frozenset({name})).functions.get(name) if model is not None else None
    except Exception:  # a function that cannot be summarised returns nothing known
        return None


def _kept(model: FileModel | None, lineage: list[str], method: str) -> Kept | None:
    if model is None:
        return None
    try:
        for owner in lineage:
            scope = next((s for s in model.scopes if s.class_name == owner and s.name == method), None)
            if scope is not None:
                return tuple(positional_params(scope.node)), model.summary(scope).keeps
    except Exception:  # a method that cannot be summarised keeps nothing known
        return None
    return None


def _passed(model: FileModel | None, lineage: list[str], method: str) -> Passed | None:
    if model is None:
        return None
    try:
        for owner in lineage:
            scope = next((s for s in model.scopes if s.class_name == owner and s.name == method), None)
            if scope is not None:
                return tuple(positional_params(scope.node)), passive_params(model, scope)
    except Exception:  # a method that cannot be summarised passes on anything
        return None
    return None
