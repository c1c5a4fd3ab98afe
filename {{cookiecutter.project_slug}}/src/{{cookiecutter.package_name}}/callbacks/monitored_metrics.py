"""A checkpoint's `monitor` that the model's validation never logs, found before any training.

Lightning's ModelCheckpoint finds it only after the first epoch's validation, and stops there
with a traceback, the epoch's work unsaved (a model that logs `val_loss` where the config
monitors `val/loss`). Here the sanity check's validation (trainer.num_sanity_val_steps
batches, before the first training step) tells which metrics validation logs; run.py adds
this callback when there is a sanity check.
"""

import pytorch_lightning as pl

from ..launch.errors import SetupError


class MonitoredMetricsLogged(pl.Callback):
    def __init__(self, monitors: dict[str, str]):
        self.monitors = monitors  # config key -> the metric it names, e.g. {"callbacks.checkpoint.monitor": "val/loss"}

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            return
        logged = sorted(trainer.callback_metrics)
        for key, metric in self.monitors.items():
            if metric not in logged:
                what = f"it logs {', '.join(logged)}" if logged else "it logs none"
                raise SetupError(
                    f"{key}={metric}: the model's validation logs no such metric ({what}), so Lightning would stop "
                    f"after the first epoch. Fix: {key}=<a metric it logs>, or self.log({metric!r}, ...) in its "
                    "validation_step (a metric of the training steps, such as train/loss: "
                    "trainer.num_sanity_val_steps=0 skips this check, and each epoch must log it: "
                    "trainer.log_every_n_steps at most its batches)"
                )
