"""The models' optimizer: AdamW, in DeepSpeed's CPU version when DeepSpeed keeps it on the CPU.

With ZeRO-Offload (strategy=deepspeed_stage_3_offload, or `offload_optimizer` in your own
DeepSpeed JSON) the optimizer state lives in CPU memory and the optimizer step runs on the
CPU. DeepSpeed then refuses torch's optimizers ("ZeRO-Offload with a client provided
optimizer") and wants its vectorized DeepSpeedCPUAdam, a C++ op compiled on first use
or at install (README, "DeepSpeed"). Both compute AdamW with the same settings.
"""

import pytorch_lightning as pl
import torch
from pytorch_lightning.strategies import DeepSpeedStrategy


def offloads_optimizer(strategy) -> bool:
    """Whether DeepSpeed keeps the optimizer in CPU memory (or on NVMe, stepped by the CPU)."""
    if not isinstance(strategy, DeepSpeedStrategy):
        return False
    offload = strategy.config.get("zero_optimization", {}).get("offload_optimizer") or {}
    return offload.get("device") in ("cpu", "nvme")


def _strategy(module: pl.LightningModule):
    try:
        return module.trainer.strategy
    except RuntimeError:  # not attached to a Trainer, e.g. in the benchmark's plain PyTorch loop
        return None


def adamw(module: pl.LightningModule, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    if offloads_optimizer(_strategy(module)):
        from deepspeed.ops.adam import DeepSpeedCPUAdam

        return DeepSpeedCPUAdam(module.parameters(), lr=lr, weight_decay=weight_decay, adamw_mode=True)
    return torch.optim.AdamW(module.parameters(), lr=lr, weight_decay=weight_decay)
