"""The project's own path: `run.run(cfg)`, exactly as train.py calls it, with a callback
that times the same window of steps as the plain loop."""

import itertools

import pytorch_lightning as pl
from omegaconf import DictConfig, open_dict

from ..run import run
from .measure import StepWindow


class TimeSteps(pl.Callback):
    def __init__(self, warmup: int, steps: int, batch_size: int, count: str | None = None):
        self.settings = (warmup, steps, batch_size)
        self.count = count
        self.window: StepWindow | None = None

    def on_train_start(self, trainer, pl_module):
        self.window = StepWindow(*self.settings, device=pl_module.device, count=self.count)
        self.window.begin()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.window.step_done()


class CompileModel(pl.Callback):
    """torch.compile of the LightningModule's calls, as the plain loop compiles its module.
    Used only where the config has no `speed.compile` switch of its own."""

    def __init__(self, mode: str):
        self.mode = mode

    def setup(self, trainer, pl_module, stage):
        pl_module.compile(mode=self.mode)  # before the strategy wraps it (DDP)


_RUNS = itertools.count()  # the same on every rank: each timed run's own directory


def monitors_validation(callback) -> bool:
    return isinstance(callback, DictConfig) and str(callback.get("monitor") or "").startswith("val/")


def without_validation(cfg: DictConfig) -> None:
    """The plain loop does not validate: neither do the benchmarks' runs (validation is not timed
    anyway), so a checkpoint that follows a validation value, which would only warn at each
    epoch's end, is left out. Call inside open_dict."""
    cfg.trainer.limit_val_batches = 0
    cfg.trainer.num_sanity_val_steps = 0
    for name in [name for name, callback in cfg.callbacks.items() if monitors_validation(callback)]:
        del cfg.callbacks[name]


def timed_run(
    cfg: DictConfig, warmup: int, steps: int, compile_mode: str | None = None, count: str | None = None
) -> StepWindow:
    """Train `warmup + steps` steps through `run.run`; the window that timed them."""
    cfg = cfg.copy()
    with open_dict(cfg):
        # A run directory belongs to one run (a new run refuses one that holds checkpoints).
        cfg.output_dir = f"{cfg.output_dir}/run-{next(_RUNS)}"
        if compile_mode and "compile" in cfg.get("speed", {}):
            cfg.speed.compile = compile_mode  # the project's own switch, applied by run.py
        elif compile_mode:
            cfg.callbacks.benchmark_compile = {"_target_": f"{__name__}.CompileModel", "mode": compile_mode}
        cfg.trainer.max_steps = warmup + steps
        cfg.trainer.max_epochs = warmup + steps  # enough: max_steps stops it
        cfg.trainer.limit_train_batches = None
        without_validation(cfg)
        cfg.callbacks.benchmark_timer = {
            "_target_": f"{__name__}.TimeSteps",
            "warmup": warmup,
            "steps": steps,
            "batch_size": cfg.data.batch_size,
            "count": count,
        }
    trainer = run(cfg)
    (timer,) = [callback for callback in trainer.callbacks if isinstance(callback, TimeSteps)]
    return timer.window
