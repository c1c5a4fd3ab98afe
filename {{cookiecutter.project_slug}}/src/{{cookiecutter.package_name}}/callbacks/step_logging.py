"""Let a model's `self.log` in `training_step` through only on the steps the logger writes.

Lightning writes step values every `trainer.log_every_n_steps` optimizer steps and drops the
others, yet each `self.log` call costs about 0.3 ms of Python (its result collection), as
much as a small model's whole step on a GPU (docs/performance.md). Dropping the calls on the
other steps gives the same logs at a fraction of the cost, and the model logs the ordinary
way. Values logged with `on_epoch=True` (or `on_step=False`) always pass: Lightning
averages them over every step. Remove this callback (`~callbacks.step_logging`) to log
every step, e.g. for a checkpoint that monitors a training-step value.
"""

import pytorch_lightning as pl


class LogOnlyWrittenSteps(pl.Callback):
    def __init__(self):
        self.skip = False

    def setup(self, trainer, pl_module, stage):
        log = pl_module.log

        def log_when_written(name, value, prog_bar=False, logger=None, on_step=None, on_epoch=None, **kwargs):
            if self.skip and not on_epoch and on_step is not False:
                return
            log(name, value, prog_bar=prog_bar, logger=logger, on_step=on_step, on_epoch=on_epoch, **kwargs)

        pl_module.log = log_when_written  # on this instance only; teardown removes it

    def teardown(self, trainer, pl_module, stage):
        vars(pl_module).pop("log", None)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.skip = not logger_writes_this_step(trainer, batch_idx)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.skip = False


def logger_writes_this_step(trainer: pl.Trainer, batch_idx: int) -> bool:
    """True in `training_step` when this batch's values reach the logger."""
    if trainer.log_every_n_steps == 0:
        return False
    # With gradient accumulation, values are written after the batch that steps the optimizer.
    done = batch_idx + 1
    steps_optimizer = done % trainer.accumulate_grad_batches == 0 or done == trainer.num_training_batches
    # Lightning's rule (LoggerConnector.should_update_logs): `+ 1` for the step being taken now.
    return steps_optimizer and ((trainer.global_step + 1) % trainer.log_every_n_steps == 0 or trainer.should_stop)
