"""Library messages that ask nothing of the user are filtered by their text, in one place
(launch/warnings.py); every other warning still shows."""

import logging
import os
import warnings

from lightning_fabric.plugins.environments import SLURMEnvironment
from lightning_utilities.core import rank_zero
from pytorch_lightning.utilities import rank_zero_info
from pytorch_lightning.utilities.warnings import PossibleUserWarning

from {{ cookiecutter.package_name }}.launch.warnings import quiet_benign_messages

from tests.helpers import FAST, project_env, run_train


def test_known_benign_warnings_are_filtered_and_others_still_show():
    messages = [
        "The 'train_dataloader' does not have many workers which may be a bottleneck. Consider increasing",
        "The AccumulateGrad node's stream does not match the stream of the node that produced",
        "`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec)`",
        # seen on one H100: DeepSpeed's first barrier, FSDP and FSDP2 on one process, bf16-mixed
        "barrier(): using the device under current context. You can specify `device_id` in `init_process_group`",
        "FSDP is switching to use `NO_SHARD` instead of ShardingStrategy.FULL_SHARD since the world size is 1.",
        "When using ``NO_SHARD`` for ``ShardingStrategy``, full_state_dict will be returned.",
        "Detected an existing checkpoint in outputs/1/checkpoints/last.ckpt, overwriting since self.overwrite=True.",
        "Precision bf16-mixed is not supported by the model summary.  Estimated model size in MB will not be",
        "Checkpoint directory /scratch/project_1/outputs/1/checkpoints exists and is not empty.",  # every resume
        "The 'val_dataloader' has a problem worth knowing about",
    ]
    with warnings.catch_warnings(record=True) as caught:  # restores the filters afterwards
        warnings.simplefilter("always")
        quiet_benign_messages()
        for message in messages:
            warnings.warn(message, PossibleUserWarning, stacklevel=1)
    assert [str(warning.message) for warning in caught] == messages[-1:]


def test_lightnings_srun_hint_outside_a_slurm_task_is_filtered(tmp_path, monkeypatch):
    srun = tmp_path / "srun"  # Slurm installed, as on a login node
    srun.write_text("#!/bin/sh\n")
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("SLURM_NTASKS", raising=False)  # not in a Slurm task
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not SLURMEnvironment.detect()
        assert ["srun" in str(warning.message) for warning in caught] == [True]  # Lightning's hint
        quiet_benign_messages()
        assert not SLURMEnvironment.detect()
    assert len(caught) == 1


class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_lightning_advertisement_is_dropped_from_the_log():
    quiet_benign_messages()
    quiet_benign_messages()  # idempotent: one filter
    lines, logger = Lines(), rank_zero.log
    logger.addHandler(lines)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        rank_zero_info("💡 Tip: For seamless cloud logging and experiment tracking, try installing [litlogger]")
        rank_zero_info("Run directory (shared by all ranks): outputs/1")
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
    assert lines.lines == ["Run directory (shared by all ranks): outputs/1"]
    assert len([f for f in logger.filters if type(f).__name__ == "_DropLines"]) == 1


def test_torchs_note_that_a_cpu_machine_has_no_cuda_runtime_is_dropped():
    quiet_benign_messages()
    lines, logger = Lines(), logging.getLogger("torch.utils.cpp_extension")  # torch.compile on a CPU logs it
    logger.addHandler(lines)
    try:
        logger.warning("No CUDA runtime is found, using CUDA_HOME='%s'", "/usr/local")
        logger.warning("Error building extension 'cpu_adam'")
    finally:
        logger.removeHandler(lines)
    assert lines.lines == ["Error building extension 'cpu_adam'"]


def test_a_slurm_task_does_not_say_lightnings_requeue_is_on(tmp_path):
    """Every rank of a Slurm job said "SLURM auto-requeueing enabled. Setting signal handlers.", of
    Lightning's requeue, which the project's (callbacks/requeue.py) replaces."""
    task = {"SLURM_NTASKS": "1", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_JOB_ID": "77"}
    task |= {"SLURM_JOB_NAME": "train", "SLURM_NODELIST": "localhost", "SLURM_STEP_ID": "0"}  # as srun sets them
    ran = run_train(*FAST, "trainer.max_epochs=1", f"output_root={tmp_path}", env=project_env(**task))
    said = ran.stdout + ran.stderr
    assert (tmp_path / "slurm-77.0").is_dir(), f"not run as a Slurm task: {said}"
    assert "auto-requeueing" not in said
    # Without the project's requeue callback, Lightning's is on and says so: the run above would show it.
    lightnings = [*FAST, "trainer.max_epochs=1", f"output_root={tmp_path / 'own'}", "~callbacks.slurm_requeue"]
    ran = run_train(*lightnings, env=project_env(**task))
    assert "SLURM auto-requeueing enabled" in ran.stdout + ran.stderr
