"""The functions an iteration engine runs once per batch (analysis.engines): ignite's process functions."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis import FileModel
from torchlint.analysis.engines import engine_iterations


def _iterations(src: str) -> list[str]:
    text = textwrap.dedent(src)
    model = FileModel(cst.parse_module(text), text)
    return sorted(f"{loop.scope.class_name or ''}.{loop.scope.name}" for loop in engine_iterations(model))


@pytest.mark.parametrize("src, expected", [
    ("""
     from ignite.engine import Engine
     def step(engine, batch):
         pass
     trainer = Engine(step)
     """, [".step"]),
    ("""
     from ignite.engine import Engine as IgniteEngine
     def step(engine, batch):
         pass
     trainer = IgniteEngine(process_function=step)
     """, [".step"]),
    ("""
     from ignite.engine import Engine
     class Base(Engine):
         pass
     class Runner(Base):
         def __init__(self):
             super().__init__(self.one)
         def one(self, engine, batch):
             pass
         @staticmethod
         def other(engine, batch):
             pass
     r = Runner()
     s = Runner(Runner.other)
     """, ["Runner.one", "Runner.other"]),
])
def test_process_functions(src, expected):
    assert _iterations(src) == expected


@pytest.mark.parametrize("src", [
    """
    from mypkg.engine import Engine
    def step(engine, batch):
        pass
    trainer = Engine(step)
    """,
    """
    from ignite.engine import Engine
    def step(engine, batch):
        pass
    trainer = Engine(make_step())
    evaluator = Engine(lambda e, b: None)
    """,
    """
    def step(engine, batch):
        pass
    trainer = Engine(step)  # ignite mentioned, never imported
    """,
])
def test_not_process_functions(src):
    assert _iterations(src) == []
