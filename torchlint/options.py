"""Command-line options shared by more than one command (`torchlint --fix --verify`, `torchlint verify`,
`torchlint run`): defined once here, below every front end that uses them."""

from __future__ import annotations

import argparse
import os


def add_device_option(p: argparse.ArgumentParser, use: str) -> None:
    """`--device` of the commands that run training scripts: $TORCHLINT_DEVICE, else cpu."""
    p.add_argument("--device", default=os.environ.get("TORCHLINT_DEVICE", "cpu"),
                   help=f"{use}: cpu or cuda (default: $TORCHLINT_DEVICE or cpu)")


class UsageParser(argparse.ArgumentParser):
    """A parser whose usage errors are one line, exit status 2 (argparse prints its usage over several first)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def no_limit_or_more(value: str) -> float:
    """A time limit in seconds: 0 (no limit) or more."""
    seconds = float(value)
    if not seconds >= 0:  # NaN too
        raise argparse.ArgumentTypeError("must be 0 (no limit) or more")
    return seconds


def cannot_run(device: str, command: str) -> str | None:
    """Why `command` cannot run training scripts here (None when it can): torch is not installed, or
    `device_missing`."""
    try:
        return device_missing(device)
    except ImportError as exc:
        return f"{command} needs torch ({exc.name} is missing): pip install 'torchlint[verify]'"


def device_missing(device: str) -> str | None:
    """Why the runs cannot use `device` (None when they can): CUDA asked for where there is none. Checked before
    anything runs, in one line, rather than in a traceback of the script's first tensor."""
    if not device.startswith("cuda"):
        return None
    import torch

    if not torch.cuda.is_available():
        return f"--device {device} but no CUDA device is available"
    return None
