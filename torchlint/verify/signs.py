"""What the runtime monitor can see on a run, named once. The monitor records signs; each rule declares which signs
show its bug (`Rule.runtime_signs`) and which signs its bug may also explain (`Rule.runtime_also`), and
the registry's `attribute` turns a record's signs into rule codes."""

from __future__ import annotations

from enum import Enum


class Sign(Enum):
    TOTAL_BACKPROPAGATED_AGAIN = "total-backpropagated-again"  # a retained loss total's nodes ran after a step
    RETAINED_GRAPH_OUTLIVES_STEP = "retained-graph-outlives-step"  # retain_graph=True on the window's last backward
    CUT_TERM_WITHOUT_GRADIENT = "cut-term-without-gradient"  # .item()/.detach()/... of a tensor no backward reached
    STEP_WITHOUT_BACKWARD = "step-without-backward"  # the first step came before any backward
    ZERO_GRAD_BETWEEN_BACKWARD_AND_STEP = "zero-grad-between-backward-and-step"
    STALE_GRADIENT = "stale-gradient"  # a step applied the previous step's gradient again
    UNSCALED_WINDOW = "unscaled-window"  # k backwards summed into one step, the loss not divided
    GRADIENTS_CLEARED_BEFORE_STEP = "gradients-cleared-before-step"  # backwards ran, the step found no gradient
    GRAPH_GROWS = "graph-grows"  # reachable autograd nodes grow from step to step
    CLIPPED_WHILE_SCALED = "clipped-while-scaled"  # clipping before GradScaler.unscale_
    SCHEDULER_BEFORE_OPTIMIZER_WARNING = "scheduler-before-optimizer-warning"  # PyTorch's own warning
    BACKWARD_THROUGH_FREED_GRAPH = "backward-through-freed-graph"  # "Trying to backward through the graph a second time"
    SAVED_TENSOR_MODIFIED = "saved-tensor-modified"  # a tensor saved for backward modified in place since
    SCALER_REFUSED = "scaler-refused"  # GradScaler's own errors


# Signs of graphs kept on purpose or by a total: a graph that grows then is their cause, not another.
GRAPHS_KEPT = (Sign.TOTAL_BACKPROPAGATED_AGAIN, Sign.BACKWARD_THROUGH_FREED_GRAPH, Sign.RETAINED_GRAPH_OUTLIVES_STEP)
