"""The flow graph and the queries rules ask of it: order within an iteration, exclusive branches, reaching
definitions, values carried round a loop."""

from __future__ import annotations

import textwrap

import libcst as cst

from torchlint.analysis import EventKind, FileModel


def model_of(src: str) -> FileModel:
    text = textwrap.dedent(src)
    return FileModel(cst.parse_module(text), text)


def events(model: FileModel, kind: EventKind, scope_name: str | None = None):
    scope = next(s for s in model.scopes if scope_name is None or s.name == scope_name)
    return scope, [e for e in scope.events if e.kind is kind]


def test_if_else_arms_are_exclusive_and_never_follow_each_other():
    model = model_of("""
        for x in loader:
            if use_amp:
                scaler.scale(loss).backward()
            else:
                loss.backward()
                optimizer.step()
        """)
    scope, (scaled, plain) = events(model, EventKind.BACKWARD)
    _, (step,) = events(model, EventKind.STEP)
    loop = model.loops[0]
    assert scope.exclusive(scaled, plain)
    assert not loop.may_follow(scaled, step) and loop.may_follow(plain, step)
    # the arms' conditions contradict: whatever the iteration, one pass never takes both
    assert not scope.may_follow(scaled, plain)


def test_contradicting_guards_in_a_helper_and_its_caller():
    model = model_of("""
        def backward(loss, scaler):
            if scaler is not None:
                scaler.scale(loss).backward()
            else:
                loss.backward()

        def train(model, loader, optimizer, scaler):
            for x in loader:
                backward(model(x).mean(), scaler)
                if scaler is not None:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
        """)
    scope, (scaled, plain) = events(model, EventKind.BACKWARD, "train")
    _, (scaler_step, step) = events(model, EventKind.STEP, "train")
    loop = next(lp for lp in model.loops if lp.scope is scope)
    assert not loop.may_follow(scaled, step) and loop.may_follow(plain, step)
    assert loop.may_follow(scaled, scaler_step) and not loop.may_follow(plain, scaler_step)


def test_elif_match_and_try_arms_are_exclusive():
    model = model_of("""
        def f(mode, opt):
            if mode == 1:
                a.backward()
            elif mode == 2:
                b.backward()
            match mode:
                case 1:
                    c.backward()
                case _:
                    d.backward()
            try:
                e.backward()
            except RuntimeError:
                g.backward()
        """)
    scope, (a, b, c, d, e, g) = events(model, EventKind.BACKWARD, "f")
    assert scope.exclusive(a, b) and scope.exclusive(c, d)
    assert not scope.exclusive(a, c)
    assert scope.may_follow(e, g)  # the handler runs after part of the body


def test_break_continue_and_return_cut_paths():
    model = model_of("""
        def f():
            for x in loader:
                loss.backward()
                if bad(x):
                    continue
                optimizer.step()
                if done(x):
                    break
            scheduler.step()
            return
            after.backward()
        """)
    scope, (b, after) = events(model, EventKind.BACKWARD, "f")
    _, (step,) = events(model, EventKind.STEP, "f")
    loop = model.loops[0]
    assert loop.may_follow(b, step)
    assert not scope.may_follow(b, after)  # after the return: never runs


def test_reaching_definitions_are_flow_sensitive():
    model = model_of("""
        def f(model, opt):
            for i in range(10):
                loss = model(x).sum()
                loss.backward()
                loss = loss.item()
                print(loss)
        """)
    scope, (backward,) = events(model, EventKind.BACKWARD, "f")
    defs, entry = scope.reaching("loss", backward)
    assert [d.value.__class__.__name__ for d in defs] == ["Call"] and not entry
    assert "item" not in cst.Module(body=[]).code_for_node(defs[0].value)


def test_value_carried_round_the_loop_and_reset_per_sequence():
    model = model_of("""
        def f(rnn, encoder):
            h = None
            for x, y in batches:
                out, h = rnn(x, h)
                out.sum().backward()
            for seq in pairs:
                g = encoder.init_hidden()
                for t in steps:
                    o, g = encoder(seq[t], g)
                o.sum().backward()
        """)
    scope = next(s for s in model.scopes if s.name == "f")
    h_def = next(e for e in scope.events if e.kind is EventKind.ASSIGN and e.target == "h" and e.flavor == "tuple")
    g_def = next(e for e in scope.events if e.kind is EventKind.ASSIGN and e.target == "g" and e.flavor == "tuple")
    first, second = [lp for lp in model.loops if lp.scope is scope and lp.outermost]
    assert scope.carried_round(h_def, first.node)
    assert not scope.carried_round(g_def, second.node)  # re-initialised for every sequence


def test_constant_trip_count():
    model = model_of("""
        n = 3
        for _ in range(n):
            loss.backward()
        for _ in range(2, 9):
            loss.backward()
        for _ in range(epochs):
            loss.backward()
        """)
    assert [lp.trip_count() for lp in model.loops] == [3, 7, None]


def test_a_later_backward_skipped_only_by_an_exception_still_follows():
    """The retained backward is followed by a plain one on every normal path; the except handler's path (the
    second backward raised) does not make the first the last of the iteration."""
    model = model_of("""
        for x in loader:
            out = model(x)
            try:
                out[0].sum().backward(retain_graph=True)
                out[1].sum().backward()
            except RuntimeError:
                log()
        """)
    scope, (first, second) = events(model, EventKind.BACKWARD)
    loop = model.loops[0]
    assert not loop.ends_iteration_after(first, [second])
    assert loop.ends_iteration_after(second, [first])
