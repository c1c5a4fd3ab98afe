"""Test-only: record full weights under strategies that shard them (ZeRO-3, FSDP2)."""

import contextlib

import torch

from tests.helpers import RecordRanks


def _gathered(pl_module):
    """ZeRO-3 parameters are shards until gathered; without DeepSpeed nothing needs gathering."""
    try:
        import deepspeed
    except ImportError:
        return contextlib.nullcontext()
    return deepspeed.zero.GatheredParameters(list(pl_module.parameters()))


def _full(tensor: torch.Tensor) -> torch.Tensor:
    """FSDP2 parameters are DTensors: each rank holds a shard, full_tensor() gathers them."""
    tensor = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
    return tensor.detach().cpu()


class RecordFullWeights(RecordRanks):
    """RecordRanks whose weight files hold the whole model on every rank, not that rank's shard."""

    def on_fit_end(self, trainer, pl_module):
        with _gathered(pl_module):
            state = {name: _full(tensor) for name, tensor in pl_module.state_dict().items()}
        torch.save(
            {"state": state, "global_step": trainer.global_step, "world_size": trainer.world_size},
            self.path / f"weights-rank{trainer.global_rank}.pt",
        )


def parameters_only(weights: list[dict]) -> list[dict]:
    """Unlike DDP, DeepSpeed and FSDP2 do not broadcast buffers: BatchNorm statistics stay per rank."""
    buffers = ("running_mean", "running_var", "num_batches_tracked")
    return [{**w, "state": {k: v for k, v in w["state"].items() if not k.endswith(buffers)}} for w in weights]
