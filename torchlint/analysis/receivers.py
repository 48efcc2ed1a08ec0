"""Receiver types: which class an object is, so that `trainer.train_step(batch)` and `self.updater.step(x)` reach
the method they call. Inferred from the constructor calls the object is bound to (`trainer = Trainer(...)` in the
function, or for a global in the module body; `self.updater = Updater(...)` in any method of the class) and from a
parameter's annotation (`trainer: Trainer`). The class must be one of the file's own or a name imported from
elsewhere (a project class, which the project's lookup then finds or not). Anything else stays unknown: every
binding of the name must agree on one class."""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from torchlint.analysis.events import AssignForm, Event, EventKind
from torchlint.analysis.exprs import argument_for, dotted, positional_params
from torchlint.analysis.foreign import ProjectLookup
from torchlint.analysis.semantics import LR_KEY, MODULE_METHODS_RETURNING_MODULE
from torchlint.source.walk import walk
from torchlint.analysis.walker import RawScope


class Receivers:
    def __init__(self, scopes: Sequence[RawScope], classes: dict[str, cst.ClassDef], imported: set[str],
                 project: ProjectLookup | None = None, star_bound: frozenset[str] = frozenset()) -> None:
        self.scopes = scopes
        self.classes = classes
        # names bound by imports; `star_bound`: those `import *` of a project file binds (a class of any spelling)
        self.imported = imported | star_bound
        self.star_bound = star_bound
        self.project = project
        self._binds: dict[int, dict[str, list[Event]]] = {}  # id(scope node) -> name -> rebinding assignments
        self._known: dict[tuple[int, str], str | None] = {}
        self._made: dict[str, str] | None = None  # `_factories`
        self._asking: set[tuple[int, str]] = set()  # `_handed`: the parameters being followed to their callers
        self._calls: dict[str, list[tuple[RawScope, cst.Call]]] | None = None  # `_handed`: the file's calls by callee

    def class_of(self, scope: RawScope, receiver: str) -> str | None:
        """The class (as this file names it) that `receiver` is an instance of in `scope`, or None."""
        key = (id(scope.node), receiver)
        if key not in self._known:
            self._known[key] = self._infer(scope, receiver)
        return self._known[key]

    def _infer(self, scope: RawScope, receiver: str) -> str | None:
        return self._known_class(self._maker(scope, receiver))

    def maker_of(self, scope: RawScope, receiver: str) -> str | None:
        """The name (as written) of the one class or function imported from elsewhere whose call every binding of
        `receiver` is (`self.loss_fn = create_loss(cfg)`), or of its annotation; None otherwise."""
        name = self._maker(scope, receiver)
        return name if name is not None and name.split(".", 1)[0] in self.imported else None

    def _maker(self, scope: RawScope, receiver: str) -> str | None:
        if receiver.startswith("self."):
            if receiver.count(".") != 1 or scope.class_name is None:
                return None
            defs = [d for s in self.scopes if s.class_name == scope.class_name for d in self._bound(s, receiver)]
        elif "." in receiver:
            return None
        else:
            defs = self._bound(scope, receiver)
            if not defs and receiver in scope.params:
                ann = scope.params[receiver].annotation
                return dotted(ann.annotation) if ann is not None else self._handed(scope, receiver)
            if not defs and scope is not self.scopes[0]:
                defs = self._bound(self.scopes[0], receiver)  # a global of the module
        if not defs:
            return None
        names = {_made_by(d.value) if d.variant is AssignForm.PLAIN and type(d.value) is cst.Call else None for d in defs}
        return names.pop() if len(names) == 1 else None

    def _handed(self, scope: RawScope, param: str) -> str | None:
        """What every call of a function of the file hands its parameter `param` is made by (`ema = WeightEMA(...)`
        then `train(model, ema)` for `def train(model, ema_optimizer)`), when each hands a name whose bindings
        say; None for a method, a function never called in the file, or calls that differ."""
        if scope.class_name is not None or "." in scope.name or (id(scope.node), param) in self._asking:
            return None
        self._asking.add((id(scope.node), param))
        try:
            params = positional_params(scope.node)
            if self._calls is None:
                self._calls = {}
                for s in self.scopes:
                    for e in s.raw:
                        if e.kind is EventKind.LOCAL_CALL and e.callee is not None and type(e.node) is cst.Call:
                            self._calls.setdefault(e.callee, []).append((s, e.node))
            found = {self._maker(s, arg.value) if not any(a.star for a in call.args)
                     and type(arg := argument_for(call, params, param)) is cst.Name else None
                     for s, call in self._calls.get(scope.name, ())}
        finally:
            self._asking.discard((id(scope.node), param))
        return found.pop() if len(found) == 1 else None

    def _known_class(self, name: str | None, made: bool = True) -> str | None:
        """`name` if it is a class of the file or imported; with `made`, also the class a function of the file
        says it returns (`def create_trainer(cfg) -> Trainer:`)."""
        if name is None:
            return None
        if made and name in self._factories():
            return self._known_class(self._factories()[name], made=False)
        if name in self.classes or name.split(".", 1)[0] in self.imported and (
                name[:1].isupper() or "." in name or name in self.star_bound):
            return name
        return None

    def _factories(self) -> dict[str, str]:
        """The file's top-level functions whose return annotation names a class: name -> that class as written."""
        if self._made is None:
            self._made = {}
            for s in self.scopes[1:]:
                node = s.node
                if type(node) is cst.FunctionDef and s.class_name is None and "." not in s.name and node.returns:
                    ann = node.returns.annotation
                    written = ann.evaluated_value if type(ann) is cst.SimpleString else dotted(ann)
                    if isinstance(written, str) and written not in ("None", s.name):
                        self._made[s.name] = written
        return self._made

    def _bound(self, scope: RawScope, name: str) -> list[Event]:
        index = self._binds.get(id(scope.node))
        if index is None:
            index = self._binds[id(scope.node)] = {}
            for e in scope.raw:
                if e.kind is EventKind.ASSIGN and e.target and e.scope is scope.node and e.variant is not AssignForm.ITEM:
                    index.setdefault(e.target, []).append(e)
        return index.get(name, [])

    def rate_setter(self, name: str) -> bool:
        """`name` is a class of the project (this file's, or through the lookup another file's) that derives from
        nothing outside it (no base, `object`, or such classes of the same file) and writes a learning rate into
        an optimizer's param groups itself (`group["lr"] = lr`): a scheduler of its own, not torch's."""
        todo, seen = [name], set()
        writes = False
        while todo:
            cls = todo.pop()
            if cls in seen:
                continue
            seen.add(cls)
            node = self.classes.get(cls)
            if node is None:
                if cls != name or self.project is None or cls.split(".", 1)[0] not in self.imported:
                    return False  # a base of a file class that the file does not define
                return self.project.rate_setter(cls)
            for base in node.bases:
                written = dotted(base.value) if base.keyword is None and not base.star else None
                if written is None or "." in written:
                    return False  # `lr_scheduler._LRScheduler`, `metaclass=...`
                if written != "object":
                    todo.append(written)
            writes = writes or _writes_rate(node, self._writes_rate_by_call)
        return writes

    def _writes_rate_by_call(self, func: str | None) -> bool:
        """A function of the file (`adjust_lr(self.optimizer, lr)`) that writes `group["lr"]` itself."""
        found = next((s for s in self.scopes if s.class_name is None and s.name == func), None) if func else None
        return found is not None and _writes_rate(found.node)


def _writes_rate(node: cst.CSTNode, by_call=None) -> bool:
    """`node` assigns a param group's learning rate (`group["lr"] = lr`), or calls what `by_call(name)` says does."""
    return any(type(n) is cst.AssignTarget and _rate_slot(n.target)
               or by_call is not None and type(n) is cst.Call and by_call(dotted(n.func))
               for n in walk(node, descend_scopes=True))


def _rate_slot(target: cst.BaseExpression) -> bool:
    """`group["lr"]`: the learning rate of a param group."""
    if type(target) is not cst.Subscript or len(target.slice) != 1 or type(target.slice[0].slice) is not cst.Index:
        return False
    key = target.slice[0].slice.value
    return type(key) is cst.SimpleString and key.evaluated_value == LR_KEY


def _made_by(call: cst.Call) -> str | None:
    """The callee that made the value of `call`: `Net` for `Net(cfg).to(device).train()`."""
    while type(call.func) is cst.Attribute and call.func.attr.value in MODULE_METHODS_RETURNING_MODULE \
            and type(call.func.value) is cst.Call:
        call = call.func.value
    return dotted(call.func)
