"""A checkpoint saved after an epoch's last batch is written as if saved at that epoch's end.

Timed checkpoints, Ctrl-C/SIGTERM saves and Slurm's preemption checkpoint are taken at batch
ends, and one in every (batches per epoch) of them falls after the epoch's last batch.
Lightning 2.6 resumes such a checkpoint in the next epoch, but skips that epoch's start
(its progress counters and on_train_epoch_start): a checkpoint written later in that epoch
then resumes with a whole epoch lost, or with batches trained twice. Lightning resumes a
checkpoint taken at an epoch's end correctly, and it skips the rest of that epoch (its
validation and epoch-end hooks) either way, so this writes the state in that form.
"""

import pytorch_lightning as pl


class LastBatchSavedAsEpochEnd(pl.Callback):
    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        batches = trainer.fit_loop.epoch_loop.batch_progress.current
        after_last_batch = batches.completed == batches.ready - 1 == trainer.num_training_batches - 1
        if trainer.training and after_last_batch and "loops" in checkpoint:
            mark_epoch_processed(checkpoint["loops"]["fit_loop"])


def mark_epoch_processed(fit_loop: dict) -> None:
    """The loop counters of a save in on_train_batch_end of the last batch, moved to those of
    a save in on_train_epoch_end: the batch completed, the epoch processed."""
    for counts in ("total", "current"):
        fit_loop["epoch_loop.batch_progress"][counts]["completed"] += 1
        fit_loop["epoch_progress"][counts]["processed"] += 1
    fit_loop["epoch_loop.state_dict"]["_batches_that_stepped"] += 1
