"""The lattice of value kinds: what a value may hold (a tensor with a graph, a number, a module ...), with how
kinds combine where definitions meet (`join`) and through arithmetic (`arith`)."""

from __future__ import annotations

from enum import Enum


class VKind(str, Enum):
    GRAPH = "tensor with graph"
    TENSOR = "tensor without graph"
    NUMBER = "number"
    STRING = "string"
    NONE = "None"
    CONTAINER = "container"  # may hold tensors with graphs
    DATA = "container of values without graph"
    MODULE = "module"
    OBJECT = "optimizer, scheduler, scaler or engine"
    UNKNOWN = "unknown"
    CYCLE = "cycle"  # internal, never returned by `of`: a definition reached from itself round a loop

    @property
    def graph_free(self) -> bool:
        """Known to hold no autograd graph."""
        return self not in (VKind.GRAPH, VKind.UNKNOWN, VKind.CONTAINER, VKind.CYCLE)


def join(kinds) -> VKind:
    out: VKind | None = None
    for k in kinds:
        if out is None:
            out = k
        elif k is not out:
            return VKind.UNKNOWN
    return out if out is not None else VKind.UNKNOWN


def arith(left: VKind, right: VKind) -> VKind:
    if VKind.GRAPH in (left, right):
        return VKind.GRAPH
    if left is VKind.NUMBER and right is VKind.NUMBER:
        return VKind.NUMBER
    if VKind.TENSOR in (left, right) and all(k in (VKind.TENSOR, VKind.NUMBER) for k in (left, right)):
        return VKind.TENSOR
    if left is VKind.STRING and right is VKind.STRING:
        return VKind.STRING
    return VKind.UNKNOWN
