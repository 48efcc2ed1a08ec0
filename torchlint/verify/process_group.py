"""A training script's process, started in a session of its own so that everything it starts (DataLoader workers,
a launcher's children, a `subprocess` of its own) can be stopped with it: at a time limit, when torchlint is
interrupted, and when the run ends, since torchlint stopped the script after N steps, not the script itself."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Sequence


def run_group(cmd: Sequence[str], timeout: float | None, **popen) -> int:
    """The exit status of `cmd`, run to its end or for `timeout` seconds (then subprocess.TimeoutExpired); its
    whole process group is killed afterwards either way. `popen` goes to subprocess.Popen (env, stdout, stderr)."""
    proc = subprocess.Popen(list(cmd), start_new_session=True, **popen)
    try:
        return proc.wait(timeout=timeout)
    finally:
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone: everything in it has ended
    proc.wait()
