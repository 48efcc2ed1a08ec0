"""The rule registry: one module per rule, listed here in code order."""

from __future__ import annotations

from torchlint.rules.base import Finding, Rule
from torchlint.rules.tl001_backward_on_accumulated_total import BackwardOnAccumulatedTotal
from torchlint.rules.tl002_retain_graph_never_released import RetainGraphNeverReleased
from torchlint.rules.tl003_detached_loss_term import DetachedLossTerm
from torchlint.rules.tl004_missing_zero_grad import MissingZeroGrad
from torchlint.rules.tl005_unscaled_accumulation import UnscaledAccumulation
from torchlint.rules.tl006_zero_grad_before_step import ZeroGradBeforeStep
from torchlint.rules.tl007_attached_logging_total import AttachedLoggingTotal
from torchlint.rules.tl008_hidden_state_not_detached import HiddenStateNotDetached
from torchlint.rules.tl009_step_before_backward import StepBeforeBackward
from torchlint.rules.tl010_grad_scaler_misuse import GradScalerMisuse
from torchlint.rules.tl011_scheduler_before_optimizer import SchedulerBeforeOptimizer

ALL_RULES: tuple[type[Rule], ...] = (
    BackwardOnAccumulatedTotal,
    RetainGraphNeverReleased,
    DetachedLossTerm,
    MissingZeroGrad,
    UnscaledAccumulation,
    ZeroGradBeforeStep,
    AttachedLoggingTotal,
    HiddenStateNotDetached,
    StepBeforeBackward,
    GradScalerMisuse,
    SchedulerBeforeOptimizer,
)
RULES_BY_CODE: dict[str, type[Rule]] = {r.code: r for r in ALL_RULES}

__all__ = ["ALL_RULES", "RULES_BY_CODE", "Finding", "Rule"]
