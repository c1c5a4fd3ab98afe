"""FSDP2 (strategy=fsdp2: ModelParallelStrategy + fully_shard) on 2 CPU processes (gloo):
training, equal weights on both ranks, sharded checkpoint save and resume."""

import signal
import time

import pytest

from {{ cookiecutter.package_name }}.callbacks.checkpoints import checkpoint_step
from {{ cookiecutter.package_name }}.launch.errors import SetupError
from {{ cookiecutter.package_name }}.models.classifier import ImageClassifier
from {{ cookiecutter.package_name }}.models.cnn import MnistCNN
from {{ cookiecutter.package_name }}.strategies.fsdp2 import shard

from tests.helpers import FAST, assert_same_weights, record_saves, recorded, run_train, start_until_first_checkpoint
from tests.sharded import parameters_only


def test_layers_the_model_lacks_are_named_before_anything_is_sharded():
    """strategy.instance.layers=[Nope] sharded nothing by layer, silently (each module whole)."""
    model = ImageClassifier(net=MnistCNN())
    # the network itself (MnistCNN) is sharded whole anyway: no layer of it
    with pytest.raises(SetupError, match=r"layers=\[MnistCNN,Conv2d\]: ImageClassifier has no layer of class MnistCNN"):
        shard(model, mesh=None, layers=("MnistCNN", "Conv2d"))


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_stop_saves_every_ranks_shards_and_the_run_resumes_from_there(tmp_path):
    """SIGTERM mid-training: before, only rank 0 saved on a stop, which FSDP2's sharded state
    cannot, and the steps since the newest checkpoint were lost. The ranks agree on the stop's
    step, all write their shards, and the printed resume command continues from that step."""
    run, saves = tmp_path / "outputs" / "fsdp2", tmp_path / "saves.txt"
    overrides = ["strategy=fsdp2", "trainer.devices=2", "trainer.max_epochs=40"]
    process = start_until_first_checkpoint(run, *overrides, *record_saves(saves, seconds_per_step=0.3))
    time.sleep(0.5)  # into the second epoch
    process.send_signal(signal.SIGTERM)
    _stdout, stderr = process.communicate(timeout=240)
    assert process.returncode == 143, stderr
    saved = int(saves.read_text().split()[-1])
    last = run / "checkpoints" / "last.ckpt"
    assert checkpoint_step(last) == saved  # from the folder's meta.pt (the newest checkpoint is found by its step)
    assert f"Stopped by SIGTERM at step {saved}: saved {last}. Resume: python train.py resume={run}" in stderr, stderr
    assert saved > 4, f"the stop's step, after the first epoch's checkpoint: {saved}"
    epochs = saved // 4 + 2  # the stopped epoch's rest, and one more
    record = tmp_path / "record"
    recording = ["+callbacks.record._target_=tests.sharded.RecordFullWeights", f"+callbacks.record.path={record}"]
    run_train(f"resume={run}", f"trainer.max_epochs={epochs}", *recording)
    weights, _writes = recorded(record)
    assert [w["global_step"] for w in weights] == [epochs * 4] * 2
    steps = [int(step) for step in saves.read_text().split()]
    assert steps == sorted(steps), "global_step went back"
