"""Command-line options shared by more than one command (`torchlint --fix --verify`, `torchlint verify`,
`torchlint run`): defined once here, below every front end that uses them."""

from __future__ import annotations

import argparse
import os


def add_device_option(p: argparse.ArgumentParser, use: str) -> None:
    """`--device` of the commands that run training scripts: $TORCHLINT_DEVICE, else cpu."""
    p.add_argument("--device", default=os.environ.get("TORCHLINT_DEVICE", "cpu"),
                   help=f"{use}: cpu or cuda (default: $TORCHLINT_DEVICE or cpu)")
