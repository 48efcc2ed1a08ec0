"""flake8 plugin: the same findings at the same positions as the CLI, from the lines flake8 already read.

flake8 owns selection and `# noqa`; this yields every TL finding (flake8 columns are 0-based). Calls into the
project's other files are followed when the command has cached their exports (`batch.cached_project`); otherwise
the file is checked alone.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from torchlint import __version__
from torchlint.batch import cached_project
from torchlint.codes import READ_ERROR
from torchlint.config import ConfigError
from torchlint.engine import lint_source
from torchlint.rules import all_rules


class TorchlintChecker:
    name = "torchlint"
    version = __version__

    def __init__(self, tree: object, lines: Sequence[str], filename: str = "stdin") -> None:
        self.lines = lines
        self.filename = filename

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        # lint_source applies the prefilter first: a file without training code costs a few text searches.
        try:
            project = cached_project(self.filename) if self.filename not in ("stdin", "-") else None
        except ConfigError as exc:  # one clear finding, not a traceback that ends flake8's whole run
            yield 1, 0, f"{READ_ERROR} cannot read the configuration: {exc}; file not checked", type(self)
            return
        for d in lint_source("".join(self.lines), self.filename, all_rules(), honour_noqa=False, project=project):
            yield d.line, d.column - 1, f"{d.code} {d.message}", type(self)
