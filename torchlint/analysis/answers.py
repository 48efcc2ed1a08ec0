"""Remembered answers to recursive questions (what kind a definition gives its name), kept only when final.

A question may meet itself again round a loop (a cycle: the other definitions decide), or go deeper than the
depth limit (cut short: unknown). Such an answer holds for the question in progress only: remembering it would
make an answer depend on which rule asked first. So each question in progress has a frame of what its answer
assumed (the cycles it met that are still open, `CUT` when cut short); an answer is remembered only when its frame
is empty once its own cycle is closed, and what it assumed of outer questions passes to its caller.

A question a rule asks (none in progress: `question`) is answered to the end: each question the depth limit cut
short is answered on its own first, starting again from depth 0, and the rule's question is asked again while
that teaches something new, so a long chain of definitions is followed to its end one depth at a time.
"""

from __future__ import annotations

import functools
from typing import Callable, Generic, Hashable, TypeVar

CUT = -1  # a frame's mark: the depth limit cut the answer short


def question(method: Callable) -> Callable:
    """A method that rules call: answered to the end when no question is in progress, else a plain call."""

    @functools.wraps(method)
    def ask(self: "Answers", *args, **kwargs):
        if self._busy:
            return method(self, *args, **kwargs)
        return self._answer(lambda: method(self, *args, **kwargs))

    return ask


Item = TypeVar("Item", bound=Hashable)  # what a subclass asks about


class Answers(Generic[Item]):
    """The bookkeeping; a subclass says when an item's answer is known (`_known`) and how to ask it (`_ask`)."""

    def __init__(self) -> None:
        self._frames: list[set[int]] = []
        self._computing: list[Item] = []  # the item of each frame
        self._open: set[int] = set()  # the keys of the questions being computed
        self._busy = False
        self._deferred: list[Item] = []  # items cut short by the depth limit, to answer on their own
        self._settling: set[Item] = set()

    def _known(self, item: Item) -> bool:
        raise NotImplementedError

    def _ask(self, item: Item) -> None:
        raise NotImplementedError

    # -- frames ----------------------------------------------------------------------------------------------
    def _enter(self, key: int, item: Item) -> set[int]:
        """Start computing the question `key` (its item, to answer again if it is cut short): its frame."""
        frame: set[int] = set()
        self._frames.append(frame)
        self._computing.append(item)
        self._open.add(key)
        return frame

    def _leave(self, key: int) -> None:
        self._frames.pop()
        self._computing.pop()
        self._open.discard(key)

    def _assumed(self, key: int) -> None:
        """The answer in progress met the open question `key` (a cycle)."""
        if self._frames:
            self._frames[-1].add(key)

    def _cut(self, item: Item | None = None) -> None:
        """The depth limit cut the answer in progress short: `item` (else the question being computed) is to be
        answered on its own."""
        self._assumed(CUT)
        if item is None and self._computing:
            item = self._computing[-1]
        if item is not None:
            self._deferred.append(item)

    def _may_remember(self, key: int, frame: set[int]) -> bool:
        """Done computing `key` with `frame`: may its answer be remembered? What it assumed of outer questions is
        handed to the caller's frame."""
        frame.discard(key)
        if not frame:
            return True
        if self._frames:
            self._frames[-1].update(frame)
        return False

    # -- a rule's question, to the end -----------------------------------------------------------------------
    def _answer(self, compute: Callable):
        self._busy = True
        try:
            while True:
                self._deferred = []
                result = compute()
                if not self._deferred or not self._settle(self._deferred):
                    return result
        finally:
            self._busy, self._deferred = False, []

    def _settle(self, pending: list[Item]) -> bool:
        """Answer each item on its own, settling first what that meets too deep; True when at least one more
        answer is now known."""
        progressed = False
        for item in dict.fromkeys(pending):
            if item in self._settling:
                continue  # already being answered further up: its depth cannot grow
            self._settling.add(item)
            while not self._known(item):
                self._deferred = []
                self._ask(item)
                if self._known(item):
                    progressed = True
                elif not self._deferred or not self._settle(self._deferred):
                    break  # cut short by a cycle, or by nothing that can be known: it stays as it is
                else:
                    progressed = True
            self._settling.discard(item)
        return progressed
