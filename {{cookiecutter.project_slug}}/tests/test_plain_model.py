"""A user's ordinary LightningModule (tests/plain_model.py) trains under every strategy through
train.py, with no strategy or logging code of its own: FSDP2 shards it, DeepSpeed's offload runs
its torch AdamW as DeepSpeed's CPU Adam, and its every-step `self.log` is written as configured."""

import csv

import pytest
import torch

from {{ cookiecutter.package_name }}.launch.errors import SetupError
from {{ cookiecutter.package_name }}.strategies.fsdp2 import shard

from tests.helpers import CPU_DEEPSPEED, FAST, PROJECT, assert_same_weights, recorded, run_train
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
