"""Checkpoints saved at a batch's end, written so that Lightning 2.6 resumes them whole.

Timed checkpoints, stop saves (SIGTERM, Ctrl-C) and Slurm's requeue save are taken at the end
of a training or a validation batch. Lightning 2.6 resumes three such points wrongly:
- after a training batch that a validation follows (an epoch's last, by default): it skips
  that validation (its metrics, the best checkpoint they choose, the epoch's checkpoint);
- after an epoch's last batch where none follows: it skips the next epoch's start (its
  progress counters and on_train_epoch_start), and a checkpoint written later in that epoch
  resumes with a whole epoch lost, or with batches trained twice;
- at a validation batch's end: it skips the rest of that validation;
- at the training's end in the middle of an epoch (trainer.max_steps or max_time reached): it
  counts that epoch as done, and a resume with a larger limit skips the rest of that epoch.
Two forms it does resume whole: a validation cut off inside its first batch (it runs that
validation again from its start; the batches' results are not saved, so it must start over),
and an epoch's end. Each save is written in one of them. (The training loader's position in the
epoch, saved with them, is given back also where Lightning forgets to: on_train_start.)
"""

import pytorch_lightning as pl


class BatchEndSavesResumeWhole(pl.Callback):
    loader_states: list = []  # the training loader's saved position, until training starts

    def on_load_checkpoint(self, trainer, pl_module, checkpoint):
        # Given back in on_train_start, not by Lightning 2.6, which (1) never gave it where
        # configure_optimizers reads trainer.estimated_stepping_batches (a OneCycleLR's total steps:
        # Lightning issue #20550), and the resumed epoch trained its first batches again; (2) stopped
        # with a traceback where the loader takes no position (a plain DataLoader of a data module
        # of your own, resumed from a checkpoint of the project's).
        fit_loop = checkpoint.get("loops", {}).get("fit_loop", {}).get("state_dict", {})
        self.loader_states = fit_loop.pop("combined_loader", [])

    def on_train_start(self, trainer, pl_module):
        states, self.loader_states = self.loader_states, []
        loader, fetcher = trainer.fit_loop._combined_loader, trainer.fit_loop._data_fetcher
        takers = [each for each in loader.flattened if hasattr(each, "load_state_dict")] if loader else []
        # Loaders that take no position: the rest of the epoch is drawn from the start of its order,
        # as Lightning's warning of a loader "not resumable" says.
        if states and len(takers) == len(states):
            for taker, state in zip(takers, states, strict=True):
                taker.load_state_dict(state)
            if fetcher is not None:  # its iterator, made before: again, for a loader that reads its position there
                iter(fetcher)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        if "loops" not in checkpoint or trainer.sanity_checking:
            return
        fit_loop, epoch_loop = checkpoint["loops"]["fit_loop"], trainer.fit_loop.epoch_loop
        batches, validation = epoch_loop.batch_progress.current, epoch_loop.val_loop.batch_progress
        epochs = trainer.fit_loop.epoch_progress.current
        if trainer.training and batches.completed == batches.ready - 1:  # in on_train_batch_end
            if epoch_loop._should_check_val_fx(trainer.fit_loop._data_fetcher):  # Lightning validates next
                batch_completed(fit_loop)
                validation_cut_off_at_its_start(fit_loop, before=validation.total.completed)
            elif batches.completed == trainer.num_training_batches - 1:
                batch_completed(fit_loop)
                epoch_processed(fit_loop)
        elif trainer.training and epochs.processed > epochs.completed and not epoch_end(trainer, batches):
            # at the training's end (max_steps, max_time) in the middle of an epoch
            batch_completed(fit_loop, by=-1)  # as saved at that batch's end, which resumes whole
            epoch_processed(fit_loop, by=-1)
        elif trainer.validating and inside_a_validation(validation):
            before = validation.total.completed - validation.current.completed
            validation_cut_off_at_its_start(fit_loop, before=before)


def epoch_end(trainer, batches) -> bool:
    return batches.completed >= trainer.num_training_batches


def inside_a_validation(progress) -> bool:
    """At a validation batch's end (in on_validation_batch_end, or a stop raised after it), not at
    the validation's end (ModelCheckpoint's save in on_validation_end resumes whole as it is)."""
    return not progress.is_last_batch or progress.current.processed > progress.current.completed


def batch_completed(fit_loop: dict, by: int = 1) -> None:
    """The counters of a save in on_train_batch_end, moved to those after it: the batch completed
    (by=-1: back)."""
    for counts in ("total", "current"):
        fit_loop["epoch_loop.batch_progress"][counts]["completed"] += by


def epoch_processed(fit_loop: dict, by: int = 1) -> None:
    """...and to those of a save in on_train_epoch_end: the epoch processed (by=-1: back)."""
    for counts in ("total", "current"):
        fit_loop["epoch_progress"][counts]["processed"] += by
    fit_loop["epoch_loop.state_dict"]["_batches_that_stepped"] += by


def validation_cut_off_at_its_start(fit_loop: dict, before: int) -> None:
    """The validation counters of a validation cut off inside its first batch; `before`: the
    validation batches of this epoch before it (the total's count; Lightning resets it each epoch)."""
    progress = fit_loop["epoch_loop.val_loop.batch_progress"]
    progress["total"].update(ready=before + 1, started=before + 1, processed=before, completed=before)
    progress["current"].update(ready=1, started=1, processed=0, completed=0)
    progress["is_last_batch"] = False
