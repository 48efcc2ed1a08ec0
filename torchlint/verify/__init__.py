"""Proof by execution: run training scripts with fixed seeds, record every optimizer step, compare runs.

Needs torch (the `verify` extra); the linter never imports this package.
"""

from torchlint.verify.compare import Mismatch, Tolerance, compare_records
from torchlint.verify.runner import run_scripts

__all__ = ["Mismatch", "Tolerance", "compare_records", "run_scripts"]
