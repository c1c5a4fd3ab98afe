"""Stop a run whose monitored validation metric (the best checkpoint's, val/loss) is no longer a
number: the training has diverged (nan or inf: a learning rate too high, an overflow in 16-bit
precision). Lightning trained on to max_epochs for nothing, exited 0, and saved the broken weights
as last.ckpt over the last good one.

Checked once per validation, on the value that all ranks share (logged with sync_dist): no cost per
step, and every rank stops at the same point. Lightning calls the checkpoint callbacks after the
others, so that validation saves nothing: the run's checkpoints are those from before it.
"""

import math

import pytorch_lightning as pl

from ..launch.errors import TrainingDiverged
from ..launch.run_directory import shown


class StopWhenDiverged(pl.Callback):
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:  # untrained weights: nothing has diverged
            return
        for checkpoint in trainer.checkpoint_callbacks:
            value = trainer.callback_metrics.get(checkpoint.monitor) if checkpoint.monitor else None
            if value is not None and not math.isfinite(float(value)):
                raise TrainingDiverged(_diverged(trainer, checkpoint.monitor, float(value), checkpoint.best_model_path))


def _diverged(trainer: pl.Trainer, monitor: str, value: float, best: str) -> str:
    """The line: where, what is kept (the best checkpoint: nan or inf is never the best), the fix."""
    where = f"{monitor}={value} at epoch {trainer.current_epoch}, step {trainer.global_step}"
    kept = f"its best checkpoint, from before, is {shown(best)}" if best else "no checkpoint has a finite one"
    start = f" (from that checkpoint: ckpt_path={best})" if best else ""
    return (
        f"{where}: the training diverged, and would train on for nothing; {kept}. Fix: a smaller learning rate "
        f"(model.optimizer.lr=...) or gradient clipping (+trainer.gradient_clip_val=1.0), in a new run{start}"
    )
