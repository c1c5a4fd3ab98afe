"""Library messages that ask nothing of the user of this project, filtered here by their text.

Only these, each with the reason it does not apply; every other warning still shows. Where
the project itself caused a warning, the cause is fixed instead (the matmul precision is set,
train.py ends the process group, the DataModule says why it uses no loader workers).
"""

import logging
import re
import warnings

BENIGN_WARNINGS = (
    # Lightning suggests more DataLoader workers for any loader with fewer than 2. Here the
    # DataModule sizes them itself and says how many and why (data/base.py): none for
    # in-memory data, which is indexed a batch at a time (on a GPU, where workers cannot reach).
    r"The '\w+' does not have many workers which may be a bottleneck",
    # torch's autograd, under Lightning's DDP: Lightning builds the DDP wrapper on a side CUDA
    # stream (by design, pytorch_lightning/strategies/ddp.py), so gradients of the first step
    # arrive on another stream than their accumulators were made on. Nothing a user can change.
    r"The AccumulateGrad node's stream does not match the stream of the node",
    # Lightning 2.6 calls a torch API that newer torch deprecates (in Lightning's own code).
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",
    # Lightning, on every machine with Slurm installed (a cluster's login nodes) when not in a
    # Slurm task: a hint to start with srun. A run outside a job needs none, and a batch
    # script that starts train.py for several devices without srun is stopped by
    # launch/topology.py, with the fix.
    r"The `srun` command is available on your system but is not used",
    # torch, when DeepSpeed's own process group (made without a device) meets its first
    # barrier: it uses the current device, the one Lightning set for this rank.
    r"barrier\(\): using the device under current context",
    # torch's FSDP on one process: there is nothing to shard, so it keeps the whole model.
    r"FSDP is switching to use `NO_SHARD` instead of ShardingStrategy.FULL_SHARD since the world size is 1",
    r"When using ``NO_SHARD`` for ``ShardingStrategy``, full_state_dict will be returned",
    # torch's distributed checkpoint, when FSDP2 writes last.ckpt again: replacing it is the point.
    r"Detected an existing checkpoint in .*last\.ckpt, overwriting since self.overwrite=True",
    # Lightning, at every test on several ranks: its DistributedSampler may test a few samples
    # twice, so it asks for devices=1. callbacks/test_repeats.py says how many, where any are.
    r"Using `DistributedSampler` with the dataloaders. During `trainer.test\(\)`",
    # Lightning, at every resume: the run's checkpoint folder holds its checkpoints. A new run
    # never meets it: launch/run_directory.py refuses a run folder that holds checkpoints.
    r"Checkpoint directory .* exists and is not empty",
    # Lightning's model summary under bf16-mixed: only its size estimate in MB is approximate.
    r"Precision bf16-mixed is not supported by the model summary",
)

# Lightning's advertisement for its cloud logger, printed by every run that uses another.
BENIGN_LOG_LINES = (r"Tip: For seamless cloud logging",)
# torch, when torch.compile (speed.compile) loads its C++ tools on a machine without a GPU:
# code compiled for the CPU needs no CUDA runtime.
BENIGN_TORCH_LOG_LINES = (r"No CUDA runtime is found",)


class _DropLines(logging.Filter):
    def __init__(self, patterns: tuple[str, ...]):
        super().__init__()
        self.pattern = re.compile("|".join(patterns))

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.search(str(record.msg))


def quiet_benign_messages() -> None:
    """Idempotent: call once per process before the Trainer is built."""
    for message in BENIGN_WARNINGS:
        warnings.filterwarnings("ignore", message=message)
    from lightning_utilities.core import rank_zero  # rank_zero_info's logger, as Lightning set it

    torch_tools = logging.getLogger("torch.utils.cpp_extension")
    for logger, patterns in ((rank_zero.log, BENIGN_LOG_LINES), (torch_tools, BENIGN_TORCH_LOG_LINES)):
        if not any(isinstance(f, _DropLines) for f in logger.filters):
            logger.addFilter(_DropLines(patterns))
