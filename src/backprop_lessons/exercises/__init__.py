"""Self-checks of the exercises: functions that take the answer as an argument.

One module per chapter topic (stable names, not chapter numbers):

    value_nodes          scalar Value nodes
    topological_sort     topological sort and the backward pass
    forward_vs_reverse   forward mode vs reverse mode
    matmul_vjp           the matmul VJP
    mlp_by_hand          an MLP by hand
    gpt_layers           every GPT layer's backward, and the whole model's,
                         written by the reader
    debugging_backward   debugging a backward pass
    backprop_at_scale    backprop at scale
    gpt2_full_size       GPT-2 at its real size
    memory_and_precision memory and precision
    higher_order         derivatives of derivatives, function transforms
    model_parallel       the backward of model parallelism
    predictions          numbers predicted before a chapter measures them
    microgpt             the appendix (self-check questions only)

Each module also holds its chapter's self-check questions, `SELF_CHECKS`
(see `questions`; `widgets.self_check` shows one).  What they share:

    checking             the one protocol: `exercise=`, a Verdict, the
                         reader's failing line quoted
    layer_checks         the checks of a layer's backward the reader
                         writes (gpt_layers, memory_and_precision)
    questions            a self-check question as data

Every check takes the reader's answer and, as a keyword, the number the
chapter gives the exercise (`check_softplus(softplus, exercise=1)`: the
notebook owns the number); it prints "Exercise N: not attempted yet - ...",
"Exercise N: not yet - <hint>" or "Exercise N: correct" and returns a
`checking.Verdict`.  Nothing here reads notebook
globals: everything a check needs is an argument or built inside it.

The checks of the backwards the reader writes in the later chapters are
also importable from here (`from backprop_lessons.exercises import
check_attention_backward`; chapter 10's FlashAttention and fused
classifier, chapter 12's parallel layers, collective and pipeline schedule
too), and so is `yours_or_the_solution`, which the cells after an exercise
use to run on the reader's function once it passes (and on the solution
until then).
"""

from .checking import assert_correct, yours_or_the_solution
from .gpt_layers import (
    check_attention_backward,
    check_crossentropy_softmax_backward,
    check_encoder_backward,
    check_gelu_backward,
    check_gpt_backward,
    check_layernorm_backward,
    check_matmul_backward,
    check_rmsnorm_backward,
)
from .memory_and_precision import (
    check_flash_attention_backward,
    check_fused_classifier_backward,
)
from .model_parallel import (
    check_column_parallel_backward,
    check_pipeline_schedule,
    check_reduce_scatter_backward,
    check_row_parallel_backward,
)
from .predictions import check_prediction

__all__ = [
    "check_layernorm_backward",
    "check_rmsnorm_backward",
    "check_gelu_backward",
    "check_crossentropy_softmax_backward",
    "check_attention_backward",
    "check_encoder_backward",
    "check_matmul_backward",
    "check_gpt_backward",
    "check_flash_attention_backward",
    "check_fused_classifier_backward",
    "check_reduce_scatter_backward",
    "check_column_parallel_backward",
    "check_row_parallel_backward",
    "check_pipeline_schedule",
    "check_prediction",
    "yours_or_the_solution",
    "assert_correct",
]
