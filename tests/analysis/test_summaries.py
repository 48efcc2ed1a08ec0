"""Function summaries: a function with its own training loop is a run of its own; per-batch helpers are placed
at their call."""

from __future__ import annotations

import textwrap

import libcst as cst

from torchlint.analysis import EventKind, FileModel

SRC = """
    def train_amp(model, loader, optimizer, scaler):
        for x, y in loader:
            scaler.scale(criterion(model(x), y)).backward()
            scaler.step(optimizer)
            scaler.update()

    def train_step(model, batch, optimizer):
        model(batch).mean().backward()
        optimizer.step()
        optimizer.zero_grad()

    def main():
        for level in levels:
            train_amp(model, loader, optimizer, scaler)
            for batch in loader:
                train_step(model, batch, optimizer)
    """


def test_summaries_say_what_each_function_does():
    text = textwrap.dedent(SRC)
    model = FileModel(cst.parse_module(text), text)
    by_name = {s.name: model.summary(s) for s in model.scopes}
    assert by_name["train_amp"].trains and by_name["train_amp"].steps == {"optimizer"}
    step = by_name["train_step"]
    assert step.per_batch and step.backprops and step.zeroes == {"optimizer"} and not step.trains
    assert not by_name["main"].backprops


def test_a_training_run_is_not_spliced_into_its_callers_iteration():
    text = textwrap.dedent(SRC)
    model = FileModel(cst.parse_module(text), text)
    main = next(s for s in model.scopes if s.name == "main")
    kinds = [(e.kind, e.inlined_from is not None) for e in main.events if e.kind in (EventKind.BACKWARD, EventKind.STEP)]
    # only train_step's backward and step reach main's loop, placed at the call
    assert kinds == [(EventKind.BACKWARD, True), (EventKind.STEP, True)]
