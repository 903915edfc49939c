"""Chapter 8's, 9's and 12's PyTorch machinery: what a backward costs, and the
backward on several processes.  It imports torch; no engine imports it.

    backward_cost   FLOP counts, saved-activation bytes, gradient buckets
    distributed     worker processes on torch.distributed (gloo): the
                    data-parallel gradients chapter 8 derives
    ddp_train       `python -m backprop_lessons.scale.ddp_train`: the GPT
                    trained with DDP or FSDP, alone or under torchrun
    scale_out       DDP/FSDP measured: broadcast, no_sync, bytes per rank,
                    speed-up, overlap of communication and backward
    collectives     chapter 12: each collective (and Megatron's f and g)
                    as an autograd Function whose backward is its VJP
    tensor_parallel Megatron's split of the GPT, by hand and with
                    torch.distributed.tensor.parallel
    pipeline        the GPT in stages under PyTorch's GPipe and 1F1B
    model_parallel_train
                    ddp_train's --tensor-parallel and --pipeline
    harness         test support for ddp_train: launching it from Python,
                    a rank that dies on purpose, torchrun's root cause
"""
