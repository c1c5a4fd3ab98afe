"""Lightning's DeepSpeedStrategy, which also runs a model's torch Adam/AdamW under ZeRO-Offload.

With the optimizer offloaded (strategy=deepspeed_stage_3_offload, or `offload_optimizer` in
your DeepSpeed JSON) the optimizer step runs on the CPU, and DeepSpeed refuses torch's
optimizers there ("ZeRO-Offload with a client provided optimizer"): it wants its vectorized
DeepSpeedCPUAdam, a C++ op (README, "DeepSpeed"). This strategy makes that swap itself, with
the same parameter groups and settings, so that a model's `configure_optimizers` stays plain.
Other optimizers reach DeepSpeed unchanged (and are refused by it under offload).
"""

import torch
from pytorch_lightning.strategies import DeepSpeedStrategy as LightningDeepSpeedStrategy

from .whole_saves import WholeSaves

# What DeepSpeedCPUAdam reads from a parameter group; `initial_lr` belongs to a scheduler.
_GROUP_KEYS = ("params", "lr", "betas", "eps", "weight_decay", "initial_lr")


class DeepSpeedStrategy(WholeSaves, LightningDeepSpeedStrategy):
    """Also: a checkpoint is written whole or not at all (whole_saves.py)."""

    @property
    def offloads_optimizer(self) -> bool:
        """Whether DeepSpeed keeps the optimizer in CPU memory (or on NVMe, stepped by the CPU)."""
        offload = self.config.get("zero_optimization", {}).get("offload_optimizer") or {}
        return offload.get("device") in ("cpu", "nvme")

    def _init_optimizers(self):
        optimizer, scheduler = super()._init_optimizers()
        if self.offloads_optimizer and is_torch_adam(optimizer):
            optimizer = cpu_adam_like(optimizer)
            if scheduler is not None:  # the scheduler must drive the optimizer that steps
                scheduler.scheduler.optimizer = optimizer
        return optimizer, scheduler


def is_torch_adam(optimizer: torch.optim.Optimizer) -> bool:
    """torch's Adam or AdamW, without amsgrad (which DeepSpeed's CPU Adam does not have)."""
    return type(optimizer) in (torch.optim.Adam, torch.optim.AdamW) and not optimizer.defaults.get("amsgrad")


def cpu_adam_like(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """DeepSpeed's CPU Adam with the parameter groups and settings of a torch Adam or AdamW."""
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    decoupled = type(optimizer) is torch.optim.AdamW or optimizer.defaults.get("decoupled_weight_decay", False)
    groups = [{key: group[key] for key in _GROUP_KEYS if key in group} for group in optimizer.param_groups]
    return DeepSpeedCPUAdam(groups, adamw_mode=decoupled)
