"""FSDP2 (strategy=fsdp2: ModelParallelStrategy + fully_shard) on 2 CPU processes (gloo):
training, equal weights on both ranks, sharded checkpoint save and resume."""

import pytest

from tests.helpers import FAST, assert_same_weights, recorded, run_train
from tests.sharded import parameters_only

pytestmark = pytest.mark.slow


def train_fsdp2(tmp_path, *overrides: str):
    record = tmp_path / "record"
    result = run_train(
        *FAST,
        "strategy=fsdp2",
        "trainer.accelerator=cpu",
        "trainer.devices=2",
        f"output_root={tmp_path / 'outputs'}",
        "run_id=fsdp2",
        "+callbacks.record._target_=tests.sharded.RecordFullWeights",
        f"+callbacks.record.path={record}",
        *overrides,
    )
    weights, _writes = recorded(record)
    return result, weights


def test_fsdp2_trains_resumes_from_sharded_checkpoint(tmp_path):
    _result, weights = train_fsdp2(tmp_path, "trainer.max_epochs=1")
    assert_same_weights(parameters_only(weights), world_size=2)
    assert [w["global_step"] for w in weights] == [4, 4]
    checkpoint = tmp_path / "outputs" / "fsdp2" / "checkpoints" / "last.ckpt"
    assert checkpoint.is_dir(), "FSDP2 checkpoints are sharded: a folder, one file per rank"
    assert len(list(checkpoint.glob("*.distcp"))) == 2

    result, weights = train_fsdp2(tmp_path, "trainer.max_epochs=2", "ckpt_path=last")
    assert "Restoring states from the checkpoint" in result.stdout + result.stderr
    assert [w["global_step"] for w in weights] == [8, 8]  # one more epoch, not two
    assert_same_weights(parameters_only(weights), world_size=2)
