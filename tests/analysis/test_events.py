"""Events made and copied without dataclasses' per-field work (`Event.at`, `Event.but`) are the events the
generated constructor and `dataclasses.replace` make."""

from __future__ import annotations

import dataclasses

import libcst as cst
import pytest

from torchlint.analysis.events import AssignForm, BackwardVia, Event, EventKind

NODE, STMT, SCOPE = cst.Name("loss"), cst.SimpleStatementLine([]), cst.Module([])


@pytest.mark.parametrize("rest", [
    {},
    {"target": "total", "variant": AssignForm.ADD, "value": cst.Name("x")},
    {"path": (STMT,), "callee": "self.step", "index": 2, "origin": ("a.py", 3)},
])
def test_event_at_is_the_generated_constructor(rest):
    made = Event.at(EventKind.ASSIGN, NODE, STMT, SCOPE, (STMT,), (), ("no_grad",), **rest)
    built = Event(EventKind.ASSIGN, NODE, STMT, SCOPE, (STMT,), (), ("no_grad",), **rest)
    assert made.__dict__ == built.__dict__
    assert set(made.__dict__) == {f.name for f in dataclasses.fields(Event)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.target = "other"  # type: ignore[misc]


def test_event_but_is_replace():
    event = Event(EventKind.METHOD, NODE, STMT, SCOPE, target="opt", variant=BackwardVia.TENSOR)
    assert event.but(target="o2", seq=4).__dict__ == dataclasses.replace(event, target="o2", seq=4).__dict__


def test_unknown_fields_are_refused():
    with pytest.raises(AssertionError):
        Event.at(EventKind.METHOD, NODE, STMT, SCOPE, (), (), (), nonsense=1)
