"""Checkpoints that only move forward, last.ckpt at epoch ends and at the end, and every N minutes.

- Writes are atomic: `<name>.partial` beside the target, fsync, rename. A kill during the
  write leaves the previous checkpoint whole (the next start removes the `.partial`).
- A save never replaces a checkpoint of a higher global step (a run that restarted from
  an older state must not overwrite newer work).
- LastCheckpoint writes last.ckpt every N epochs and always when training ends; where a callback
  (EarlyStopping) ended it early, that last.ckpt says so (STOPPED_EARLY).
- TimedCheckpoint bounds what a node failure loses: only rank 0 reads the clock, and
  several ranks agree on its answer every few seconds (agreement.py: no collective per step).
"""

import copy
import os
import shutil
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytorch_lightning as pl
import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.utilities import rank_zero_warn

from ..launch.errors import CheckpointNotWritten
from .agreement import AgreedFlag

PARTIAL = ".partial"
STOPPED_EARLY = "stopped_early"  # a checkpoint's key: a callback ended the training there, before its limits


def state_file(path: Path) -> Path | None:
    """The file that holds a checkpoint's training state (step, epoch, loops, callbacks): the
    checkpoint itself, or in a sharded checkpoint's folder DeepSpeed's model states of rank 0
    (ZeRO-3's are per rank) or FSDP's meta.pt; None where a folder holds none of them."""
    if not path.is_dir():
        return path
    deepspeed = path / "checkpoint"  # Lightning's DeepSpeed tag
    candidates = (
        deepspeed / "mp_rank_00_model_states.pt",
        deepspeed / "zero_pp_rank_0_mp_rank_00_model_states.pt",
        path / "meta.pt",
    )
    return next((candidate for candidate in candidates if candidate.is_file()), None)


def saved_value(path: Path, key: str, default=None):
    """A value saved in a checkpoint file (or a sharded one's folder); `default` if unreadable."""
    state = state_file(path)
    if state is None:
        return default
    try:  # mmap: only the small header is read, not the tensors
        return torch.load(state, map_location="cpu", mmap=True, weights_only=False).get(key, default)
    except Exception:  # a truncated file from an older version, or another format
        return default


def checkpoint_step(path: Path) -> int:
    """The global step saved in a checkpoint file (or a sharded one's folder), -1 if unreadable."""
    return int(saved_value(path, "global_step", -1))


def run_checkpoints(run_dir: Path) -> list[Path]:
    """Every checkpoint of a run: checkpoints/*.ckpt (last, best, timed) and hpc_ckpt_*.ckpt."""
    found = [*run_dir.glob("checkpoints/*.ckpt"), *run_dir.glob("hpc_ckpt_*.ckpt")]
    return [path for path in found if not path.name.endswith(PARTIAL)]


def checkpoint_steps(run_dir: Path) -> list[tuple[Path, int]]:
    """Every checkpoint of a run and its step (-1: unreadable), the newest last: the highest step;
    on a tie last.ckpt, which is saved last at a step (the best one at a validation's end, last.ckpt
    then at the epoch's or the training's end); else the newer file. Not the file times alone:
    `cp -r` gives every file the copy's time, and a copied finished run resumed from its best
    checkpoint, trained on."""
    steps = []
    for path in run_checkpoints(run_dir):
        try:
            steps.append((checkpoint_step(path), path.name == "last.ckpt", path.stat().st_mtime, path))
        except FileNotFoundError:  # the best checkpoint replaced by a better one meanwhile
            continue
    return [(path, step) for step, _last, _mtime, path in sorted(steps, key=lambda item: item[:3])]


def newest_checkpoint(run_dir: Path) -> tuple[Path, int] | None:
    """The newest checkpoint of a run (checkpoint_steps) and its step."""
    steps = checkpoint_steps(run_dir)
    return steps[-1] if steps else None


def remove_partial_files(run_dir: Path) -> None:
    """What a kill during a write left behind (rank 0, before training): files, and the folders
    of sharded checkpoints (strategies/whole_saves.py)."""
    for path in [*run_dir.glob(f"checkpoints/*{PARTIAL}"), *run_dir.glob(f"*{PARTIAL}")]:
        remove(path)


def remove(path: Path) -> None:
    """A checkpoint file, or the folder of a sharded one."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


class ForwardOnlyCheckpointIO(TorchCheckpointIO):
    """torch.save through a temporary file; refuses to replace a checkpoint of a higher step.

    in_background: a thread writes the files, in the order asked, so that training goes on
    meanwhile. The state is taken when the save is asked for (host_snapshot): on a GPU by copies
    queued behind the work that made it, so the host does not wait for the GPU, which would
    then idle while the file is written. `wait()` returns once every file asked for is written
    (Lightning's teardown, the stop and requeue callbacks call it) and raises a write's error."""

    def __init__(self, in_background: bool = False):
        self.steps: dict[str, int] = {}  # what this process wrote: no need to read it back
        self.in_background = in_background
        self._writer: ThreadPoolExecutor | None = None
        self._pending: list[Future] = []
        self._failed = False  # a background write failed: what was asked after it is not done

    def save_checkpoint(self, checkpoint, path, storage_options=None):
        if "://" in str(path):  # a remote file system: Lightning's own way
            self.wait()
            return super().save_checkpoint(checkpoint, path, storage_options)
        if not self.in_background:
            return self._write(checkpoint, Path(path))
        snapshot, arrived = host_snapshot(checkpoint)
        self._submit(self._write, snapshot, Path(path), arrived)

    def remove_checkpoint(self, path):
        # After the writes asked for before: a better checkpoint is on disk before the old goes.
        if not self.in_background:
            return super().remove_checkpoint(path)
        self._submit(super().remove_checkpoint, path)

    def wait(self):
        while self._pending:
            write = self._pending[0]
            try:
                write.result()  # raises what the write raised
            finally:
                if write.done():  # a wait cut short (a second Ctrl-C) keeps it: the next wait waits for it too
                    self._pending.remove(write)

    def teardown(self):
        self.wait()
        if self._writer is not None:
            self._writer.shutdown()
            self._writer = None

    def _submit(self, function, *args):
        for done in [write for write in self._pending if write.done()]:
            self._pending.remove(done)
            done.result()  # an earlier write failed: say so now, not at the end of training
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-writer")
        self._pending.append(self._writer.submit(self._unless_failed, function, *args))

    def _unless_failed(self, function, *args):
        """In the writer thread, in order: after a failed write nothing more is done. The removal
        of the old best, asked for after the new best's write, would leave the run without a best
        checkpoint; a later last.ckpt would name a best that was never written."""
        if self._failed:
            return
        try:
            function(*args)
        except BaseException:
            self._failed = True
            raise

    def _write(self, checkpoint, path: Path, arrived: torch.cuda.Event | None = None):
        step = int(checkpoint.get("global_step", -1))
        existing = self.steps.get(str(path))
        if existing is None and path.exists():
            existing = checkpoint_step(path)
        if existing is not None and existing > step:
            rank_zero_warn(f"Not saving {path} at step {step}: it holds step {existing}, newer work.")
            return
        if arrived is not None:
            arrived.synchronize()  # this thread waits for the copies from the GPU; training does not
        partial = path.with_name(path.name + PARTIAL)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(partial, "wb") as file:
                torch.save(checkpoint, file)
                file.flush()
                os.fsync(file.fileno())
            os.replace(partial, path)  # atomic on POSIX: readers see the old file or the new one
        except Exception as error:  # a full disk: torch's writer says "unexpected pos", its cause ENOSPC
            partial.unlink(missing_ok=True)  # else a full disk stays full
            raise CheckpointNotWritten(f"{path} could not be written at step {step}: {_reason(error)}") from error
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself survives a crash of the node
        finally:
            os.close(directory)
        self.steps[str(path)] = step


def _reason(error: BaseException) -> str:
    """The operating system's words where an OSError is in the chain (No space left on device)."""
    cause = error
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__ or cause.__context__
    said = str(cause.strerror or cause) if isinstance(cause, OSError) else str(error)
    return said.strip().splitlines()[-1] if said.strip() else type(error).__name__


def host_snapshot(checkpoint):
    """The checkpoint with each tensor copied to the host as it is now, and an event that
    marks the copies from the GPU done (None without a GPU). A GPU tensor is copied
    non-blocking into pinned memory, in stream order: the host does not wait, and the next
    step's updates come after the copy. A CPU tensor is cloned: training changes some in
    place (the optimizer's step counts). Containers keep their type and attributes."""

    def snapshot(value):
        if isinstance(value, torch.Tensor):
            value = value.detach()
            return value.to("cpu", non_blocking=True) if value.is_cuda else value.clone()
        if isinstance(value, dict):
            copied = copy.copy(value)  # e.g. a state_dict's _metadata (module versions)
            for key, item in value.items():
                copied[key] = snapshot(item)
            return copied
        if isinstance(value, list | tuple):
            items = [snapshot(item) for item in value]
            return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)  # namedtuple
        return value

    copied = snapshot(checkpoint)
    arrived = None
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        arrived = torch.cuda.Event()
        arrived.record()
    return copied, arrived


def wait_for_checkpoint_writes(trainer: pl.Trainer) -> None:
    """Until the checkpoints asked for are on disk (before a process leaves by os._exit)."""
    wait = getattr(trainer.strategy.checkpoint_io, "wait", None)
    if wait is not None:
        wait()


class LastCheckpoint(ModelCheckpoint):
    """`<dirpath>/last.ckpt` after every `every_n_epochs`-th epoch, and always when training ends.

    Lightning's ModelCheckpoint(every_n_epochs=5) alone would not save the end of a 7-epoch
    run (nor of one stopped by max_steps between two saves): that work would be lost. Where
    epochs take seconds, saving every epoch costs more than it protects (a few % of the
    throughput on a GPU), so every_n_epochs can be raised safely. Not save_last=True on the
    best checkpoint: Lightning 2.6 rewrites that file only when the best changes."""

    def __init__(self, dirpath: str, every_n_epochs: int = 1):
        super().__init__(
            dirpath=dirpath, filename="last", every_n_epochs=every_n_epochs, save_top_k=1, enable_version_counter=False
        )
        self.stopped_early = False

    def on_train_end(self, trainer, pl_module):
        # Only at a normal end: a stop by signal or error ends in on_exception (SaveOnStop saves).
        from ..launch.resume_checks import stopped_early

        # Ended early (EarlyStopping): saved again, at the same step, saying so. A resume to test
        # (test_after_fit=true) or a restart while it tested trained on from it otherwise, as if
        # epochs were left, and replaced the early-stopped checkpoints.
        self.stopped_early = stopped_early(trainer)
        if (trainer.global_step != self._last_global_step_saved or self.stopped_early) and not trainer.fast_dev_run:
            self._save_checkpoint(trainer, self.format_checkpoint_name({}))

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        if self.stopped_early:
            checkpoint[STOPPED_EARLY] = True


def write_forward_only(trainer, in_background: bool) -> None:
    """Every checkpoint file through ForwardOnlyCheckpointIO (atomic, never over a higher step), where the
    strategy uses Lightning's plain torch.save (DeepSpeed and sharded strategies write their own formats).
    Installed by TimedCheckpoint before, so that a run without it (~callbacks.timed_checkpoint) lost both."""
    if type(trainer.strategy.checkpoint_io) is TorchCheckpointIO:
        trainer.strategy.checkpoint_io = ForwardOnlyCheckpointIO(in_background)


class TimedCheckpoint(pl.Callback):
    """Also write `<dirpath>/last.ckpt` every `every_minutes` of training, mid-epoch.

    Rank 0's clock decides; several ranks agree on its answer about every `agree_every_seconds`
    (one small all-reduce then, none per step; one process needs none). `write_in_background`: every
    checkpoint's file written by a thread (run.py gives it to write_forward_only)."""

    def __init__(
        self, dirpath: str, every_minutes: float = 30, agree_every_seconds: float = 10, write_in_background: bool = True
    ):
        self.path = Path(dirpath) / "last.ckpt"
        self.seconds = every_minutes * 60
        self.agreement = AgreedFlag(agree_every_seconds)
        self.last_save = time.monotonic()
        self.checked_step = -1
        self.write_in_background = write_in_background

    def on_train_start(self, trainer, pl_module):
        self.last_save = time.monotonic()

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        self.last_save = time.monotonic()  # any checkpoint (epoch end, hpc) restarts the clock

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        if self.seconds <= 0 or step == self.checked_step:
            return  # once per step when gradients accumulate over several batches: after its optimizer step
        self.checked_step = step
        due = trainer.is_global_zero and time.monotonic() - self.last_save >= self.seconds
        if self.agreement.agreed(trainer, due):  # every rank takes part in the save
            trainer.save_checkpoint(self.path)
