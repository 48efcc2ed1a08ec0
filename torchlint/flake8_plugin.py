"""flake8 plugin: the same findings at the same positions as the CLI, from the lines flake8 already read.

flake8 owns selection and `# noqa`; this yields every TL finding (flake8 columns are 0-based).
"""

from __future__ import annotations

from typing import Iterator, Sequence

from torchlint import __version__
from torchlint.engine import lint_source
from torchlint.rules import ALL_RULES


class TorchlintChecker:
    name = "torchlint"
    version = __version__

    def __init__(self, tree: object, lines: Sequence[str], filename: str = "stdin") -> None:
        self.lines = lines
        self.filename = filename

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        # lint_source applies the prefilter first: a file without training code costs a few text searches.
        for d in lint_source("".join(self.lines), self.filename, ALL_RULES, honour_noqa=False):
            yield d.line, d.column - 1, f"{d.code} {d.message}", type(self)
