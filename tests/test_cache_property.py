"""The cache, as a property: whatever is done to a project between two runs (files created, edited, copied,
moved, linked, deleted, whole folders dropped as a branch switch does, the configuration changed), the cached
output is the output of `--no-cache`. A fixed seed and a bounded number of steps: the same sequences on every run."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from torchlint import batch
from tests.helpers import lint_in_process

# Where files go: scripts and the helpers they import, as found from each folder (the script's own folder
# first, then the root, then src/; a module before a package of the same name).
PLACES = ("train.py", "engine.py", "sub/train.py", "sub/engine.py", "sub/deep/train.py", "sub/deep/engine.py",
          "lib/__init__.py", "lib/engine.py", "lib/engine/__init__.py", "src/engine.py", "notes.py")
FOLDERS = ("sub", "sub/deep", "lib", "lib/engine", "src")

LOOP = "for x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n"
SCRIPTS = (
    "from engine import step\n" + LOOP + "    step(optimizer)\n",
    "import engine\n" + LOOP + "    engine.step(optimizer)\n",
    "from lib.engine import step\n" + LOOP + "    step(optimizer)\n",
    "from lib import engine\n" + LOOP + "    engine.step(optimizer)\n",
    "from . import engine\n" + LOOP + "    engine.step(optimizer)\n",
    LOOP + "    optimizer.step()\n",  # TL004 of its own
)
HELPERS = (
    "def step(opt):\n    opt.step()\n",  # the caller never clears the gradients: TL004
    "def step(opt):\n    opt.step()\n    opt.zero_grad()\n",  # correct
    "def step(opt):\n    opt.zero_grad()\n    opt.step()\n",  # clears between backward and step: TL006
    "def step(opt):\n    pass\n",  # nothing happens
    "def step(opt):\n    opt.step(\n",  # does not parse
    "",
)
CONFIGS = (
    None,
    '[tool.torchlint]\nselect = ["TL004"]\n',
    '[tool.torchlint]\nignore = ["TL004"]\n',
    '[tool.torchlint]\nignore = ["TL006"]\n',
    '[tool.torchlint]\nper-file-ignores = {"sub/*" = ["TL004"]}\n',
    '[tool.torchlint]\nextend-exclude = ["lib"]\n',
)

places = st.sampled_from(PLACES)


class Project(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="torchlint-cache-property-"))

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    @initialize(texts=st.tuples(*(st.sampled_from((None,) + (SCRIPTS if p.endswith("train.py") else HELPERS))
                                  for p in PLACES)))
    def populate(self, texts: tuple[str | None, ...]) -> None:
        """A project to start from: scripts where scripts go, helpers where helpers go (some left out)."""
        for where, text in zip(PLACES, texts):
            if text is not None:
                self.write(where, text)

    def _put(self, where: str, data: bytes) -> None:
        """A regular file at `where` (a symlink there is replaced, as a checkout replaces it)."""
        path = self.root / where
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()
        path.write_bytes(data)

    @rule(where=places, text=st.sampled_from(SCRIPTS + HELPERS))
    def write(self, where: str, text: str) -> None:
        self._put(where, text.encode())

    @rule(src=places, dst=places)
    def copy(self, src: str, dst: str) -> None:
        if src != dst and (self.root / src).is_file():
            self._put(dst, (self.root / src).read_bytes())

    @rule(src=places, dst=places)
    def move(self, src: str, dst: str) -> None:
        if src != dst and (self.root / src).is_file():
            (self.root / dst).parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.root / src, self.root / dst)

    @rule(src=places, dst=places)
    def link(self, src: str, dst: str) -> None:
        """`dst` becomes a symlink to `src` (which may not exist, or be moved away later)."""
        if src != dst:
            (self.root / dst).parent.mkdir(parents=True, exist_ok=True)
            (self.root / dst).unlink(missing_ok=True)
            (self.root / dst).symlink_to(os.path.relpath(self.root / src, (self.root / dst).parent))

    @rule(where=places)
    def delete(self, where: str) -> None:
        (self.root / where).unlink(missing_ok=True)

    @rule(folder=st.sampled_from(FOLDERS))
    def drop_folder(self, folder: str) -> None:
        shutil.rmtree(self.root / folder, ignore_errors=True)

    @rule(config=st.sampled_from(CONFIGS))
    def configure(self, config: str | None) -> None:
        if config is None:
            (self.root / "pyproject.toml").unlink(missing_ok=True)
        else:
            (self.root / "pyproject.toml").write_text(config)

    @invariant()
    def cached_output_is_uncached_output(self) -> None:
        cached = lint_in_process(self.root)
        assert cached == lint_in_process(self.root, "--no-cache")
        assert cached[0] in (0, 1), cached


def test_cached_output_is_always_uncached_output(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))  # a key of its own, and one that can be made
    hits = []
    real_get = batch.Cache.get

    def get(self, *args):
        found = real_get(self, *args)
        hits.append(found is not None)
        return found

    monkeypatch.setattr(batch.Cache, "get", get)
    run_state_machine_as_test(Project, settings=settings(
        derandomize=True, database=None, max_examples=100, stateful_step_count=12, deadline=None,
        suppress_health_check=list(HealthCheck)))
    # The property holds trivially of a cache that is never read: it was, and answered often.
    assert sum(hits) > len(hits) // 4, (sum(hits), len(hits))
