"""A user's ordinary LightningModule (tests/plain_model.py) trains under every strategy through
train.py, with no strategy or logging code of its own: FSDP2 shards it, DeepSpeed's offload runs
its torch AdamW as DeepSpeed's CPU Adam, and its every-step `self.log` is written as configured."""

import csv
import subprocess
import sys

import pytest
import torch

from {{ cookiecutter.package_name }}.launch.errors import SetupError
from {{ cookiecutter.package_name }}.strategies.fsdp2 import shard

from tests.helpers import CPU_DEEPSPEED, FAST, PROJECT, assert_same_weights, project_env, recorded, run_train
from tests.plain_model import PlainModel
from tests.sharded import parameters_only

PLAIN = [f"hydra.searchpath=[file://{PROJECT / 'tests' / 'configs'}]", "model=plain", "trainer.log_every_n_steps=2"]


def train_plain(tmp_path, strategy: str, processes: int, *overrides: str) -> list[dict]:
    record = tmp_path / "record"
    run_train(
        *FAST,
        *PLAIN,
        f"strategy={strategy}",
        "trainer.accelerator=cpu",
        f"trainer.devices={processes}",
        f"output_root={tmp_path / 'outputs'}",
        "run_id=plain",
        "+callbacks.record._target_=tests.sharded.RecordFullWeights",
        f"+callbacks.record.path={record}",
        *overrides,
    )
    weights, _writes = recorded(record)
    assert_same_weights(parameters_only(weights), world_size=processes)
    assert [w["global_step"] for w in weights] == [4] * processes
    with open(tmp_path / "outputs" / "plain" / "csv" / "metrics.csv") as metrics:
        steps = [int(row["step"]) for row in csv.DictReader(metrics) if row.get("train/loss")]
    assert steps == [1, 3], "train/loss is written every trainer.log_every_n_steps steps"
    return weights


@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
def test_plain_model_trains_on_two_processes(strategy, tmp_path):
    weights = train_plain(tmp_path, strategy, 2)
    assert "net.1.weight" in weights[0]["state"]


@pytest.mark.parametrize(
    "strategy", ["deepspeed_stage_1", "deepspeed_stage_2", "deepspeed_stage_3", "deepspeed_stage_3_offload"]
)
def test_plain_model_trains_under_deepspeed(strategy, tmp_path):
    pytest.importorskip("deepspeed")
    train_plain(tmp_path, strategy, 1, *CPU_DEEPSPEED)


def test_fsdp2_names_parameters_it_cannot_shard():
    """FSDP2 shards submodules: a parameter held by the LightningModule itself gets one line and the fix."""
    model = PlainModel()
    model.scale = torch.nn.Parameter(torch.ones(1))
    with pytest.raises(SetupError, match=r"holds parameters itself \(scale\)\. Fix: move them into a submodule"):
        shard(model, mesh=None, layers=None)


def refused_plain(tmp_path, *overrides: str) -> str:
    """The one line with which train.py refuses the plain model with these overrides, before training."""
    command = [sys.executable, "train.py", *FAST, *PLAIN, f"output_root={tmp_path}", *overrides]
    result = subprocess.run(command, cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert not list(tmp_path.iterdir()), "refused before the first training step: nothing made"
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("ERROR: ")]
    return line


def test_a_checkpoint_that_monitors_a_metric_validation_does_not_log_is_refused_before_training(tmp_path):
    """The plain model logs val/loss: monitored as val_loss (how many models spell it), Lightning
    stopped after the first epoch's validation with a traceback, and nothing was saved."""
    # (the loggers had begun: their first files were left in the run's folder)
    overrides = ["callbacks.checkpoint.monitor=val_loss", "trainer.num_sanity_val_steps=1", "logger=tensorboard"]
    line = refused_plain(tmp_path, *overrides)
    assert line.startswith(
        "ERROR: callbacks.checkpoint.monitor=val_loss: the model's validation logs no such metric (it logs val/loss)"
    ), line
    assert "Fix: callbacks.checkpoint.monitor=<a metric it logs>, or self.log('val_loss', ...)" in line, line
    # a training metric's way: the skip alone met Lightning's traceback where an epoch logged none
    assert "trainer.num_sanity_val_steps=0 skips this check, and each epoch must log it: trainer.log_every_n" in line
    # a resume refused so leaves its run's folder as it was (TensorBoard had begun a file of its own);
    # resume= finds model=plain through the start's hydra.searchpath (before: "no such choice")
    run = tmp_path / "run"
    run_train(*FAST, *PLAIN, f"output_root={tmp_path}", f"run_id={run.name}", "logger=tensorboard")
    files = sorted(run.rglob("*"))
    resume = [sys.executable, "train.py", f"resume={run}", "trainer.max_epochs=2", *overrides]
    result = subprocess.run(resume, cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and line in result.stderr, result.stdout + result.stderr
    assert sorted(run.rglob("*")) == files


def test_testing_after_fit_a_model_without_a_test_step_is_refused_before_training(tmp_path):
    """Lightning refused it in trainer.test, after all the training, with a traceback."""
    line = refused_plain(tmp_path, "test_after_fit=true")
    assert line == (
        "ERROR: test_after_fit=true: PlainModel has no test_step, so there would be nothing to test after the "
        "training. Fix: test_after_fit=false, or write its test_step"
    ), line
