"""Checkpoint and requeue a Slurm job before its time runs out, at a point all ranks agree on.

`#SBATCH --signal=SIGUSR1@90` makes Slurm send SIGUSR1 90 s before the time limit. Lightning's
own handler saves a checkpoint inside the signal handler; a rank that is in the middle of a
gradient all-reduce at that moment never joins the checkpoint's barrier, and the job hangs
until Slurm kills it (seen on the local Slurm of the tests). Here the handler only raises a
flag; at a training or validation batch's end the ranks agree on it (about once a second:
agreement.py; a validation can outlast the 90 s), then they save the checkpoint that Lightning
resumes from (hpc_ckpt_<n>.ckpt in the run directory, which stays the same: the run id is the
job id; a save during a validation resumes with that whole validation: batch_end_saves.py),
rank 0 requeues the job, and all exit. While testing (test_after_fit) they save nothing: the
requeued job finds the training ended, and tests.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytorch_lightning as pl
from lightning_fabric.plugins.environments import SLURMEnvironment, TorchElasticEnvironment
from pytorch_lightning.utilities import rank_zero_info

from ..launch.run_directory import resume_command, shown
from .agreement import AgreedFlag, between_optimizer_steps
from .checkpoints import wait_for_checkpoint_writes


class SlurmRequeue(pl.Callback):
    def __init__(self, signum: int = signal.SIGUSR1):
        self.signum = signal.Signals(signum)
        self.requested = False
        # Each kind of batch agrees at its own pace (stop.py says why).
        self.agreements = {kind: AgreedFlag() for kind in ("train", "validation", "test")}
        self.active = False
        # Only where srun started every rank: torchrun/horovodrun jobs are requeued by the batch
        # script, which gets the signal instead (--signal=B:USR1@90). Elsewhere run.py leaves
        # this callback out: Lightning would call it on every hook of every step for nothing.
        self.applies = SLURMEnvironment.detect() and not TorchElasticEnvironment.detect()

    def setup(self, trainer, pl_module, stage):
        # Also while testing (test_after_fit, or a requeued job that only tests): the requeued
        # job finds the training ended and tests (run.py). Before, the signal did nothing then.
        self.active = stage in ("fit", "test") and self.applies
        if self.active:
            # Registered before Lightning registers its handlers, so it keeps its own off for this signal.
            signal.signal(self.signum, self._on_signal)
            environment = trainer._accelerator_connector.cluster_environment
            if isinstance(environment, SLURMEnvironment):  # nor would it say, on every rank, that it requeues
                environment.auto_requeue = False

    def _on_signal(self, signum, frame):
        self.requested = True

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if not self.active or between_optimizer_steps(trainer):
            return
        if self.agreements["train"].agreed(trainer, self.requested):
            self._save_and_requeue(trainer)

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if not self.active or trainer.sanity_checking:  # before training: nothing to save yet
            return
        if self.agreements["validation"].agreed(trainer, self.requested):
            self._save_and_requeue(trainer)

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if self.active and self.agreements["test"].agreed(trainer, self.requested):
            self._save_and_requeue(trainer)

    def _save_and_requeue(self, trainer):
        if trainer.testing:  # a test changes no weights: the training's checkpoints are whole
            rank_zero_info(f"{self.signum.name}: requeueing the job, which tests again")
        else:
            path = trainer._checkpoint_connector.hpc_save_path(trainer.default_root_dir)  # where Lightning resumes
            rank_zero_info(f"{self.signum.name}: saving {path} and requeueing the job")
            trainer.save_checkpoint(path)  # ends with a barrier: every rank gets here before the requeue
        wait_for_checkpoint_writes(trainer)  # rank 0's files on disk before the requeue kills the job
        code = 0
        if trainer.is_global_zero and (failure := _requeue()) is not None:
            # Not requeued (a job of --no-requeue, a site without requeues): exit 0 read COMPLETED,
            # the training unfinished. The job fails instead, and says how to go on.
            run = Path(trainer.default_root_dir)
            if trainer.testing:
                kept = f"the training's checkpoints are whole; to test: {resume_command(run)} test_after_fit=true"
            else:
                kept = f"saved {shown(path)}. Resume: {resume_command(run)}"
            print(f"\n{self.signum.name}: the job was not requeued ({failure}): {kept}", file=sys.stderr)
            code = 1
        # Leave now, on every rank: the requeue kills this job step, and a rank that went on
        # (finishing the epoch, saving last.ckpt) could still be writing when the requeued job starts.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _requeue() -> str | None:
    """`scontrol requeue` of this job: None, or why it failed, in scontrol's words."""
    try:
        result = subprocess.run(["scontrol", "requeue", _job_id()], capture_output=True, text=True)
    except OSError as error:  # no scontrol where the ranks run (a container without Slurm's commands)
        return f"scontrol: {error.strerror}"
    said = (result.stderr + result.stdout).strip().splitlines()
    return None if result.returncode == 0 else f"scontrol requeue: {said[-1] if said else f'exit {result.returncode}'}"


def _job_id() -> str:
    if "SLURM_ARRAY_JOB_ID" in os.environ:
        return f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ['SLURM_ARRAY_TASK_ID']}"
    return os.environ["SLURM_JOB_ID"]
