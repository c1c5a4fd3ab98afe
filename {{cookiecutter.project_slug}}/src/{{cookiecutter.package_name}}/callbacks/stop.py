"""SIGTERM (Slurm's time limit, scancel) and Ctrl-C: save, then exit non-zero with the resume command.

Lightning turns SIGTERM into an exception at the next batch boundary and exits 0, so the
job reads as COMPLETED. Here Ctrl-C takes the same clean path (a second Ctrl-C stops at
once, also during the save; SIGTERM again changes nothing: Slurm, `timeout` and the launcher
of the other ranks each send it, so a rank may get it twice); the state is saved to
last.ckpt, one line names it and the resume command, and the
process exits 143 (SIGTERM) or 130 (Ctrl-C) as shells and Slurm expect. (A job that requeued
itself on SIGUSR1 has already left: callbacks/requeue.py.) Several ranks stop at the same
batch's end, once they agree on the signal (about once a second: agreement.py).
A stop while testing (test_after_fit) saves nothing, as the training's checkpoints are
whole; its line names the command that tests.
"""

import signal
import sys
from contextlib import contextmanager, suppress
from pathlib import Path

import pytorch_lightning as pl
from pytorch_lightning.utilities.exceptions import SIGTERMException

from ..launch.resume_checks import epochs_done, limit_reached
from ..launch.run_directory import resume_command, shown
from .agreement import AgreedFlag, between_optimizer_steps
from .checkpoints import newest_checkpoint, wait_for_checkpoint_writes

EXIT_CODES = {"SIGTERM": 128 + signal.SIGTERM, "Ctrl-C": 128 + signal.SIGINT}


class SaveOnStop(pl.Callback):
    def __init__(self, dirpath: str, run_dir: str, agree_every_seconds: float = 1.0):
        self.path = Path(dirpath) / "last.ckpt"
        self.run_dir = Path(run_dir)
        self.reason: str | None = None  # set by the signal handler
        # One agreement per kind of batch: each spaces its collectives at its own batches' pace. One
        # for both took the pace of fast validation batches (or the sanity check's) for training
        # steps, and the next agreement fell up to 1000 training steps away: a stop then came too
        # late for Slurm's grace time, and nothing was saved.
        self.agreements = {kind: AgreedFlag(agree_every_seconds) for kind in ("train", "validation", "test")}
        self.previous: dict = {}
        self.exit_code: int | None = None
        self.catching = False  # from training's or testing's start (before: train.py's Ctrl-C line)

    def on_train_start(self, trainer, pl_module):
        self._catch_signals(trainer, "step")
        if trainer.world_size > 1:
            # Lightning 2.6 agrees on SIGTERM itself, with a broadcast it reads at every step
            # (agreement.py says what that costs on GPUs); this callback's agreement replaces it.
            epoch_loop = trainer.fit_loop.epoch_loop
            if hasattr(epoch_loop, "_broadcast_sigterm_tensor"):
                epoch_loop._broadcast_sigterm_tensor = _agreed_at_batch_ends

    def on_test_start(self, trainer, pl_module):
        # test_after_fit, or a resume that only tests: a stop ends the test at a batch's end and
        # saves nothing (the training's checkpoints are whole). Lightning's own handler hung two
        # ranks here, each signalled twice (by the group and by rank 0's launcher).
        self._catch_signals(trainer, "test batch")

    def _catch_signals(self, trainer, batch: str) -> None:
        self.catching = True
        # One process with nothing to agree on and no gradients accumulating: no per-batch calls
        # (Lightning skips a hook that is not callable), the signal handler stops after this batch.
        alone = trainer.world_size == 1 and trainer.accumulate_grad_batches == 1
        if alone:
            self.on_train_batch_end = self.on_validation_batch_end = self.on_test_batch_end = None

        # Lightning's own SIGTERM handler runs a collective inside the handler, which can pair
        # with another rank's gradient all-reduce; this one only raises the flag that the ranks
        # agree on at a batch's end (and passes the signal on to processes it started).
        def on_signal(signum, frame):
            if self.reason:
                if signum == signal.SIGINT:  # a second Ctrl-C: stop now (stop_exit_code says where)
                    raise KeyboardInterrupt
                return  # SIGTERM again: already stopping
            self.reason = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
            if signum == signal.SIGTERM and trainer.strategy.launcher is not None:
                trainer.strategy.launcher.kill(signum)  # Ctrl-C reaches them from the terminal
            if alone:  # Lightning stops after this batch
                trainer._signal_connector.received_sigterm = True
            if trainer.world_size > 1:
                where = f"the {batch} all ranks agree on (within about a second)"
            elif alone or trainer.testing:
                where = f"this {batch}"
            elif trainer.validating:  # a validation's batch: no optimizer step in between
                where = "this validation batch"
            else:  # gradients accumulate: not in between two optimizer steps (agreement.py)
                where = "the next optimizer step"
            doing = "stopping" if trainer.testing else "saving"
            print(f"\n{self.reason}: {doing} at the end of {where}", file=sys.stderr, flush=True)

        self.previous = {signum: signal.signal(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if not between_optimizer_steps(trainer):
            self._stop_if_agreed(trainer, self.agreements["train"])

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if not trainer.sanity_checking:  # before training: no signal handler yet, nothing to stop
            self._stop_if_agreed(trainer, self.agreements["validation"])

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._stop_if_agreed(trainer, self.agreements["test"])

    def _stop_if_agreed(self, trainer, agreement: AgreedFlag):
        if agreement.agreed(trainer, self.reason is not None):
            # Lightning raises SIGTERMException after this hook (every rank: they agreed)
            trainer._signal_connector.received_sigterm = True

    def on_train_end(self, trainer, pl_module):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    on_test_end = on_train_end

    def on_exception(self, trainer, pl_module, exception):
        if isinstance(exception, SIGTERMException):
            # A test changes no weights, nor does the sanity check (before any step of this start;
            # a save there replaced the checkpoint a resume started from by one in the middle of
            # that check): nothing new to save
            saved = not trainer.testing and not trainer.sanity_checking
            if saved:
                self._save(trainer)
            reason = self.reason or "SIGTERM"
        elif isinstance(exception, KeyboardInterrupt):  # mid-step: nothing consistent to save
            reason, saved = "Ctrl-C", False
        else:
            return
        wait_for_checkpoint_writes(trainer)  # every file asked for on disk before the line that names one
        if saved and trainer.world_size > 1:
            # Every rank is here (they agreed on the stop). None may leave before rank 0's save
            # ends: Lightning's launcher, torchrun and srun kill the others once one has exited.
            trainer.strategy.barrier("saved on stop")
        self.exit_code = EXIT_CODES[reason]
        self.report(trainer, reason, saved)

    def report(self, trainer, reason: str, saved: bool) -> None:
        """Rank 0's one line: where the run stopped, what holds its work, how to go on."""
        if not trainer.is_global_zero:
            return
        newest = newest_checkpoint(self.run_dir)
        # A resume that only tests restores no training state: the step is its checkpoint's.
        step = newest[1] if trainer.testing and newest else trainer.global_step
        where = (
            f"saved {shown(self.path)}" if saved else f"newest {shown(newest[0])}" if newest else "no checkpoint yet"
        )
        if not saved and newest and newest[1] < step:  # a second Ctrl-C cut the stop's save short
            where += f" (step {newest[1]}: the {step - newest[1]} step(s) since are lost)"
        stopped = f"Stopped by {reason} at step {step}"
        if trainer.testing or limit_reached(trainer, epochs_done(trainer), trainer.global_step):
            # Stopped while testing, or at the last epoch's end: a resume trains nothing, and with
            # test_after_fit it tests (run.py)
            test = f"{resume_command(self.run_dir)} test_after_fit=true"
            message = f"{stopped}, after the training's end: {where}. Nothing is left to train; to test: {test}"
        else:
            resume = "Resume" if saved or newest else "Start it again from its beginning"
            message = f"{stopped}: {where}. {resume}: {resume_command(self.run_dir)}"
        print(f"\n{message}", file=sys.stderr)
        sys.stderr.flush()

    def _save(self, trainer) -> None:
        """Every rank is here, at the same step (one process, or the ranks agreed on the stop), so
        each strategy saves as it does at any step: DDP's rank 0 alone, DeepSpeed and FSDP every
        rank its shards (before, their state was not saved on a stop, and the steps since the
        last timed checkpoint were lost)."""
        # A stop during a validation resumes with that whole validation: batch_end_saves.py sets
        # the loop counters in the dump.
        checkpoint = trainer._checkpoint_connector.dump_checkpoint(weights_only=False)
        trainer.strategy.save_checkpoint(checkpoint, self.path)


def _agreed_at_batch_ends() -> None:
    """In place of Lightning's per-step SIGTERM broadcast: SaveOnStop's agreement decides."""


@contextmanager
def stop_exit_code(trainer: pl.Trainer):
    """Lightning exits 0 after SIGTERM and 1 after Ctrl-C: exit with SaveOnStop's code instead.
    A second Ctrl-C during the stop's save ends Lightning's handling of the first: the run is
    named with its newest whole checkpoint here (a save cut short is removed at the next start),
    not taken by train.py for a start that trained nothing (which discarded the start's config)."""
    stoppers = [callback for callback in trainer.callbacks if isinstance(callback, SaveOnStop)]
    try:
        yield
    except SystemExit as stop:
        codes = [stopper.exit_code for stopper in stoppers if stopper.exit_code]
        if codes:
            raise SystemExit(codes[0]) from None
        if isinstance(stop, SIGTERMException):  # SaveOnStop did not take it: Lightning's exit 0 otherwise
            if stoppers:  # the signal came at the training's end (its last save), before the test: not run
                stoppers[0].report(trainer, "SIGTERM", saved=False)
            else:
                print("\nStopped by SIGTERM (nothing saved: callbacks.save_on_stop is left out)", file=sys.stderr)
            raise SystemExit(EXIT_CODES["SIGTERM"]) from None
        raise
    except KeyboardInterrupt:
        if not stoppers or not stoppers[0].catching:
            raise
        # A second Ctrl-C cut short the wait for the stop's file, which the writer thread goes on
        # writing (Python waits for it at exit all the same): the line names what is then on disk.
        # It said the steps since the checkpoint before were lost. A third Ctrl-C leaves it unsaid.
        with suppress(Exception, KeyboardInterrupt):
            wait_for_checkpoint_writes(trainer)
        stoppers[0].report(trainer, "Ctrl-C", saved=False)
        raise SystemExit(EXIT_CODES["Ctrl-C"]) from None
