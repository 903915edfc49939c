"""Chapter 8's, 9's and 12's PyTorch machinery: what a backward costs, and the
backward on several processes.  It imports torch; no engine imports it.

    backward_cost   FLOP counts, saved-activation bytes, gradient buckets
    distributed     worker processes on torch.distributed (gloo): the
                    data-parallel gradients chapter 8 derives
    scale_out       DDP/FSDP measured: broadcast, no_sync, bytes per rank,
                    speed-up, overlap of communication and backward

  the trainer, `python -m backprop_lessons.scale.ddp_train`
    ddp_train       the program: its command line, the process group, the
                    training loop and its dispatch to data, tensor or
                    pipeline parallelism; `launch` runs it from Python
    train_options   the options of a run (TrainOptions, TINY_CONFIG)
    gpt_module      the GPT as torch.nn.Modules, from gpt.init_params
    batches         the same global batch of step k on every rank
    optimizer       PyTorch's AdamW as the book's, for every mode
    data_parallel   DDP or FSDP2 around the model, and one step
    resume          the run saved after every step and resumed (DCP files;
                    not activation checkpointing, which is checkpointing.py)
    model_parallel_train
                    ddp_train's --tensor-parallel and --pipeline runners

  chapter 12's model parallelism
    collectives     each collective (and Megatron's f and g) as an autograd
                    Function whose backward is its VJP
    tensor_parallel Megatron's split of the GPT, by hand and with
                    torch.distributed.tensor.parallel
    vocab_parallel  the vocabulary-parallel embedding and cross-entropy
    pipeline        the GPT in stages under PyTorch's GPipe, 1F1B,
                    interleaved 1F1B and zero-bubble schedules
    clipping        the global gradient norm over the ranks
"""
