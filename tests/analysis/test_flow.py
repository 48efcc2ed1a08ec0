"""The flow graph and the queries rules ask of it: order within an iteration, exclusive branches, reaching
definitions, values carried round a loop."""

from __future__ import annotations

import textwrap

import libcst as cst

from torchlint.analysis import AssignForm, EventKind, FileModel


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
    h_def = next(e for e in scope.events if e.kind is EventKind.ASSIGN and e.target == "h" and e.variant is AssignForm.UNPACK)
    g_def = next(e for e in scope.events if e.kind is EventKind.ASSIGN and e.target == "g" and e.variant is AssignForm.UNPACK)
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


def _chain(n: int) -> str:
    steps = "".join(f"        loss = loss + out[{i}].sum()\n" for i in range(n))
    return ("def f(model, data, opt, criterion):\n    for x, y in data:\n        out = model(x)\n"
            "        loss = criterion(out, y)\n" + steps + "        loss.backward()\n        opt.step()\n")


def _work_following_a_chain(monkeypatch, n: int) -> tuple[int, int]:
    """Predecessor lists read and assignment events scanned while following the loss of a chain of `n`
    accumulations back to its definitions (each reads `out`, defined before the chain)."""
    from torchlint.analysis.scopes import Scope

    counts = {"pred": 0, "scanned": 0}

    class CountingPred(list):
        def __getitem__(self, i):
            counts["pred"] += 1
            return list.__getitem__(self, i)

    class CountingEvents(list):
        def __iter__(self):
            for e in list.__iter__(self):
                counts["scanned"] += 1
                yield e

    assignments = Scope.assignments
    monkeypatch.setattr(Scope, "assignments", lambda self, name: CountingEvents(assignments(self, name)))
    model = model_of(_chain(n))
    scope, (backward,) = events(model, EventKind.BACKWARD, "f")
    scope.flow.pred = CountingPred(scope.flow.pred)
    counts.update(pred=0, scanned=0)
    defs = scope.summand_defs(backward.value, backward)
    assert len([d for d in defs if d.target == "loss"]) == n + 1  # every step of the chain, and the first loss
    return counts["pred"], counts["scanned"]


def test_following_a_chain_of_accumulations_is_linear(monkeypatch):
    """Reaching definitions followed through N `loss = loss + ...` read each flow node's predecessors a bounded
    number of times in all (the walk back to `out` is remembered per node), and never rescan every assignment
    of a name per definition visited: 4x the chain, at most about 4x the work (quadratic work would be 16x)."""
    small = _work_following_a_chain(monkeypatch, 100)
    big = _work_following_a_chain(monkeypatch, 400)
    assert big[0] <= 4.5 * small[0], (small, big)
    assert big[1] <= 4.5 * max(small[1], 1), (small, big)


def _naive_backward(pred: list[list[int]], start: int, stops: frozenset[int]) -> tuple[frozenset[int], bool]:
    found, entry, seen, todo = set(), False, set(), list(pred[start])
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in stops:
            found.add(n)
        elif n == 0:
            entry = True
        else:
            todo.extend(pred[n])
    return frozenset(found), entry


def test_remembered_backward_walk_equals_a_fresh_walk_on_graphs_with_cycles():
    """The walk that remembers each node's answer (shared by every query of a name) gives what a fresh walk
    gives, whatever the order of the queries, on random graphs full of cycles and self-loops."""
    import random

    from torchlint.analysis.flow import walk_back

    rng = random.Random(21)
    for _ in range(300):
        size = rng.randint(2, 14)
        pred = [[] if n == 0 else rng.sample(range(size), rng.randint(0, min(3, size))) for n in range(size)]
        stops = frozenset(rng.sample(range(1, size), rng.randint(0, size - 1)))
        memo: dict = {}
        for start in rng.sample(range(size), size):
            assert walk_back(pred, start, stops, memo) == _naive_backward(pred, start, stops), (pred, stops, start)
