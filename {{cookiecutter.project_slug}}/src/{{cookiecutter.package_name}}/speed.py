"""The fast-path switches of `speed:` in configs/train.yaml: checked before anything runs,
applied by run.py. Each changes GPU runs only; CPU runs keep plain fp32 eager PyTorch.

- matmul_precision: torch.set_float32_matmul_precision; "high" lets float32 matmuls use
  TF32 tensor cores (A100, H100: several times faster, 10-bit mantissa inputs).
- cudnn_benchmark: cuDNN times its convolution algorithms for each new shape once, then
  uses the fastest (Lightning's Trainer(benchmark=...) sets it).
- compile: torch.compile the model's call (its forward), with a mode: default,
  reduce-overhead (CUDA graphs: far less host time per step), max-autotune.
"""

import pytorch_lightning as pl
import torch
from omegaconf import DictConfig
from pytorch_lightning.accelerators import CUDAAccelerator

from .launch.errors import SetupError
from .launch.values import COMPILE_MODES, MATMUL_PRECISIONS, check_compile_strategy


def check_speed(speed: DictConfig, strategy: DictConfig) -> None:
    if speed.matmul_precision not in MATMUL_PRECISIONS:
        raise SetupError(
            f"speed.matmul_precision={speed.matmul_precision} is not one of {', '.join(MATMUL_PRECISIONS)}. "
            "Fix: speed.matmul_precision=high (TF32 on GPUs) or highest (full float32)"
        )
    if not isinstance(speed.cudnn_benchmark, bool):
        raise SetupError(
            f"speed.cudnn_benchmark={speed.cudnn_benchmark} is not true or false. Fix: speed.cudnn_benchmark=true"
        )
    mode = speed.compile
    if mode is False:
        return
    if mode not in COMPILE_MODES:
        raise SetupError(
            f"speed.compile={mode} is neither false nor a torch.compile mode ({', '.join(COMPILE_MODES)}). "
            "Fix: speed.compile=default, or speed.compile=reduce-overhead for CUDA graphs"
        )
    check_compile_strategy(speed, strategy)


def check_fused(model: DictConfig) -> None:
    fused = (model.get("optimizer") or {}).get("fused", "auto")
    if fused not in (True, False, "auto"):
        raise SetupError(
            f"model.optimizer.fused={fused} is not true, false or auto. "
            "Fix: model.optimizer.fused=auto (the fused kernel on CUDA GPUs only)"
        )


def set_matmul_precision(speed: DictConfig, on_gpu: bool) -> None:
    """Before fit, so that Lightning does not warn that it was left at "highest"; GPUs only."""
    if on_gpu:
        torch.set_float32_matmul_precision(speed.matmul_precision)


def trains_on_gpu(trainer: pl.Trainer) -> bool:
    return isinstance(trainer.accelerator, CUDAAccelerator)  # ROCm GPUs too


def compiled(speed: DictConfig, model: pl.LightningModule) -> pl.LightningModule:
    """The model with its call compiled in place (`self(images)` in its steps runs compiled), as
    a plain loop compiles its module. Not Lightning's own way (torch.compile of the whole
    LightningModule), which compiles the steps too: under CUDA graphs the metric state that a
    validation step updates then lives in graph memory that the next call overwrites (train.py
    stopped with "accessing tensor output of CUDAGraphs that has been overwritten" on an H100)."""
    if speed.compile is not False:
        model.compile(mode=speed.compile)
    return model
