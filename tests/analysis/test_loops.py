"""Loop queries: per-step functions as iterations, loop-invariant tests, a test unchanged between two events."""

from __future__ import annotations

import textwrap

import libcst as cst

from torchlint.analysis import EventKind, FileModel


def _model(src: str) -> FileModel:
    text = textwrap.dedent(src)
    return FileModel(cst.parse_module(text), text)


def test_step_bodies_are_functions_that_back_propagate_outside_their_loops_and_step():
    model = _model("""
        def update(net, loss, opt):
            loss.backward()
            for group in opt.param_groups:
                group["lr"] *= 0.5
            opt.step()

        def backward_only(loss):
            loss.backward()

        def fit(net, loader, opt):
            for x in loader:
                net(x).mean().backward()
                opt.step()
        """)
    assert [loop.scope.name for loop in model.step_bodies()] == ["update"]
    assert all(loop.node is None for loop in model.step_bodies())


def _guards_of_sched(src: str):
    model = _model(src)
    loop = next(lp for lp in model.loops if lp.of(EventKind.SCHED_STEP) and lp.outermost)
    sched = loop.of(EventKind.SCHED_STEP)[0]
    step = loop.of(EventKind.STEP)[0]
    return loop, sched, step


def test_invariant_reads_nothing_the_loop_binds_and_calls_nothing():
    loop, sched, _ = _guards_of_sched("""
        for i, x in enumerate(loader):
            if cfg.warm and mode == "step":
                sched.step()
            if i > 0:
                sched.step()
            if ready():
                sched.step()
            if self.warm:
                sched.step()
            opt.step()
        """)
    tests = [e.guards[-1].test for e in loop.of(EventKind.SCHED_STEP)]
    assert [loop.invariant(t) for t in tests] == [True, False, False, False]


def test_unchanged_between_sees_a_rebinding_on_the_way():
    loop, sched, step = _guards_of_sched("""
        for x in loader:
            if phase == "train":
                sched.step()
            phase = following(phase)
            opt.step()
        """)
    assert not loop.unchanged_between(sched.guards[0].test, sched, step)
    loop, sched, step = _guards_of_sched("""
        for x in loader:
            if phase == "train":
                sched.step()
            opt.step()
        """)
    assert loop.unchanged_between(sched.guards[0].test, sched, step)
