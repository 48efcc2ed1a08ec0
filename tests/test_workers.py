"""Worker processes with a hard time limit per job (torchlint.workers): results in order, a job past its limit or
whose worker dies is a Failed and the others go on, calls from several threads run side by side."""

from __future__ import annotations

import os
import threading
import time

import pytest

from torchlint.workers import Failed, Pool


def job(arg):
    kind, value = arg
    if kind == "sleep":
        time.sleep(value)
    elif kind == "die":
        os._exit(3)
    elif kind == "raise":
        raise ValueError(value)
    return value


def test_map_keeps_order_and_kills_a_job_at_its_limit():
    args = [("sleep", 0.3), ("sleep", 30), ("value", "c"), ("die", 0), ("value", "e")]
    with Pool(2) as pool:
        results = list(pool.map(job, args, [5, 1, 5, 5, 5]))
    assert results[0] == 0.3 and results[2] == "c" and results[4] == "e"
    assert results[1] == Failed(True, "killed at its time limit")
    assert results[3] == Failed(False, "the worker process died (exit code 3)")


def test_map_raises_what_the_job_raised():
    with Pool(1) as pool, pytest.raises(ValueError, match="bad"):
        list(pool.map(job, [("raise", "bad")], [5]))


def test_calls_from_threads_run_side_by_side_and_a_stuck_one_is_killed():
    results: dict[int, object] = {}
    finished: list[int] = []  # the calls, in the order they returned
    with Pool(2) as pool:

        def call(i, arg, limit):
            results[i] = pool.call(job, arg, limit)
            finished.append(i)

        threads = [threading.Thread(target=call, args=(0, ("sleep", 60), 1.0)),
                   threading.Thread(target=call, args=(1, ("sleep", 0.5), 5))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == {0: Failed(True, "killed at its time limit"), 1: 0.5}
        assert finished == [1, 0], finished  # the short call did not wait for the stuck one
        assert pool.call(job, ("value", 7), 5) == 7  # the killed worker was replaced
