"""The optimizer the model configs build (`model.optimizer`): torch's AdamW, fused on CUDA.

The fused kernel updates every parameter in one launch instead of several per tensor,
which matters when a step is short. On CPUs it stays off: CPU runs keep torch's default.
Under ZeRO-Offload the DeepSpeed strategy swaps it for DeepSpeed's CPU Adam
(strategies/deepspeed.py), so nothing here depends on the strategy.
"""

from collections.abc import Iterable, Sequence

import torch


def adamw(
    params: Iterable,
    lr: float = 1e-3,
    betas: Sequence[float] = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    fused: bool | str = "auto",
):
    params = list(params)
    if fused == "auto":  # parameters are on their device when configure_optimizers runs
        fused = all(tensor.is_cuda for tensor in _tensors(params))
    # A tuple, not the config's list: checkpoints keep the settings, and load with weights_only=True.
    betas = tuple(float(beta) for beta in betas)
    return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, fused=fused or None)


def _tensors(params: list) -> list[torch.Tensor]:
    """Parameters given as tensors or as parameter groups ({"params": [...], ...})."""
    groups = params if params and isinstance(params[0], dict) else [{"params": params}]
    return [tensor for group in groups for tensor in group["params"]]
