"""DeepSpeed ZeRO 1/2/3 and ZeRO-3 offload through train.py on CPUs, with the test-only CPU
strategy of tests/cpu_deepspeed.py: training, equal weights on every rank, resume, conversion."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch

from {{ cookiecutter.package_name }}.callbacks.checkpoints import checkpoint_step
from {{ cookiecutter.package_name }}.convert_zero_checkpoint import convert
from {{ cookiecutter.package_name }}.models.classifier import ImageClassifier
from {{ cookiecutter.package_name }}.models.cnn import MnistCNN

from tests.helpers import (
    CPU_DEEPSPEED,
    FAST,
    PROJECT,
    assert_same_weights,
    project_env,
    record_saves,
    recorded,
    run_train,
    start_until_first_checkpoint,
)
from tests.sharded import parameters_only

pytest.importorskip("deepspeed")


def train_deepspeed(tmp_path, strategy: str, processes: int, *overrides: str):
    record = tmp_path / "record"
    result = run_train(
        *FAST,
        f"strategy={strategy}",
        *CPU_DEEPSPEED,
        "trainer.accelerator=cpu",
        f"trainer.devices={processes}",
        f"output_root={tmp_path / 'outputs'}",
        "run_id=zero",
        "+callbacks.record._target_=tests.sharded.RecordFullWeights",
        f"+callbacks.record.path={record}",
        *overrides,
    )
    weights, _writes = recorded(record)
    return result, weights


ZERO_STRATEGIES = ["deepspeed_stage_1", "deepspeed_stage_2", "deepspeed_stage_3", "deepspeed_stage_3_offload"]


def check_one_epoch(tmp_path, weights: list[dict], processes: int) -> None:
    """Every rank trained the one epoch, in step, and the run saved its DeepSpeed checkpoint."""
    assert_same_weights(parameters_only(weights), world_size=processes)
    assert [w["global_step"] for w in weights] == [4] * processes
    assert (tmp_path / "outputs" / "zero" / "checkpoints" / "last.ckpt" / "latest").is_file()


# ZeRO-3 on two processes: the first run of test_zero3_resumes_and_converts_to_a_plain_state_dict
TWO_PROCESSES = [pytest.param(strategy, 2, marks=pytest.mark.slow) for strategy in ZERO_STRATEGIES[:2]]


@pytest.mark.parametrize(("strategy", "processes"), [*((strategy, 1) for strategy in ZERO_STRATEGIES), *TWO_PROCESSES])
def test_zero_stage_trains(strategy, processes, tmp_path):
    _result, weights = train_deepspeed(tmp_path, strategy, processes)
    check_one_epoch(tmp_path, weights, processes)


def test_own_deepspeed_json_replaces_the_stage(tmp_path):
    ds_config = tmp_path / "ds_config.json"
    ds_config.write_text(json.dumps({"zero_optimization": {"stage": 3}}))
    _result, weights = train_deepspeed(tmp_path, "deepspeed_json", 1, f"strategy.instance.config={ds_config}")
    assert weights[0]["global_step"] == 4
    saved = {p.name for p in (tmp_path / "outputs" / "zero" / "checkpoints" / "last.ckpt").rglob("*.pt")}
    assert "zero_pp_rank_0_mp_rank_00_model_states.pt" in saved, f"not a ZeRO-3 checkpoint: {saved}"


def test_shipped_ds_config_leaves_batch_sizes_to_lightning():
    ds_config = json.loads((PROJECT / "configs" / "deepspeed" / "ds_config.json").read_text())
    derived = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"}
    assert not derived & set(ds_config), "Lightning sets these from data.batch_size and accumulate_grad_batches"


def adam_steps(checkpoint: Path) -> list[int]:
    """Adam's step count in each rank's ZeRO-3 optimizer shard."""
    shards = sorted((checkpoint / "checkpoint").glob("*_optim_states.pt"))
    states = [torch.load(shard, weights_only=False)["optimizer_state_dict"]["optimizer_state_dict"] for shard in shards]
    return [int(state["step"]) for shard_state in states for state in shard_state["state"].values()]


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["deepspeed_stage_3", "deepspeed_stage_3_offload"])
def test_zero3_resumes_and_converts_to_a_plain_state_dict(strategy, tmp_path):
    checkpoint = tmp_path / "outputs" / "zero" / "checkpoints" / "last.ckpt"
    _result, weights = train_deepspeed(tmp_path, strategy, 2, "trainer.max_epochs=1")
    check_one_epoch(tmp_path, weights, processes=2)
    assert adam_steps(checkpoint) == [4, 4]
    result, weights = train_deepspeed(tmp_path, strategy, 2, "trainer.max_epochs=2", "ckpt_path=last")
    assert "Restoring states from the checkpoint" in result.stdout + result.stderr
    assert [w["global_step"] for w in weights] == [8, 8]  # one more epoch, not two
    assert adam_steps(checkpoint) == [8, 8]  # the optimizer state was restored, and kept counting

    plain = convert(checkpoint, tmp_path / "model.pt")
    model = ImageClassifier(MnistCNN())
    model.load_state_dict(torch.load(plain, weights_only=False)["state_dict"])  # strict: every key matches
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(tensor, weights[0]["state"][name], msg=f"{name} differs after conversion")


@pytest.mark.slow
def test_deepspeed_launcher_starts_the_processes(tmp_path):
    """The single-node form of docs/deepspeed.md: `deepspeed --num_gpus 2 --no_local_rank train.py ...`."""
    # What the `deepspeed` command runs, wherever pip put the command itself.
    launcher = (sys.executable, "-m", "deepspeed.launcher.runner", "--num_gpus", "2", "--no_local_rank")
    record = tmp_path / "record"
    run_train(
        *FAST,
        "strategy=deepspeed_stage_2",
        *CPU_DEEPSPEED,
        "trainer.accelerator=cpu",
        "trainer.devices=2",
        f"output_root={tmp_path / 'outputs'}",
        "+callbacks.record._target_=tests.sharded.RecordFullWeights",
        f"+callbacks.record.path={record}",
        launcher=launcher,
        env=project_env(RUN_ID="deepspeed-launcher"),  # run_train adds DS_ACCELERATOR=cpu, for the launcher too
    )
    weights, _writes = recorded(record)
    assert_same_weights(parameters_only(weights), world_size=2)
    assert [p.name for p in (tmp_path / "outputs").iterdir()] == ["deepspeed-launcher"]


class KilledDuringSave(pl.Callback):
    """Test-only: after training step `step`, the process is killed while it saves last.ckpt,
    once DeepSpeed has written the first of its files."""

    def __init__(self, step: int, path: str):
        self.step, self.path = step, path

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step != self.step:
            return
        save = torch.save

        def save_then_die(*args, **kwargs):
            save(*args, **kwargs)
            os._exit(137)

        torch.save = save_then_die
        trainer.save_checkpoint(self.path)


@pytest.mark.parametrize("processes", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_a_stop_saves_every_ranks_shards_and_the_run_resumes_from_there(processes, tmp_path):
    """SIGTERM mid-epoch (the time limit, scancel). Before, only rank 0 saved on a stop, which
    DeepSpeed's sharded state cannot: the line named the newest timed or epoch checkpoint and
    the steps since were lost. Every rank is at the same step (they agree on the stop), so all
    write their shards, and the run resumes from the stop's step."""
    run, saves = tmp_path / "outputs" / "zero", tmp_path / "saves.txt"
    last = run / "checkpoints" / "last.ckpt"
    overrides = ["strategy=deepspeed_stage_2", *CPU_DEEPSPEED, f"trainer.devices={processes}", "trainer.max_epochs=40"]
    env = {**project_env(), "DS_ACCELERATOR": "cpu"}
    process = start_until_first_checkpoint(run, *overrides, *record_saves(saves, seconds_per_step=0.3), env=env)
    time.sleep(1)  # into the second epoch
    process.send_signal(signal.SIGTERM)
    _stdout, stderr = process.communicate(timeout=240)
    assert process.returncode == 143, stderr
    saved = checkpoint_step(last)
    assert f"Stopped by SIGTERM at step {saved}: saved {last}. Resume: " in stderr, stderr
    assert saved > 4, f"the stop's step, after the first epoch's checkpoint: {saved}"
    epochs = saved // 4 + 2  # the stopped epoch's rest, and one more
    if processes > 1:  # its shards resume only on as many processes: one line, nothing changed
        command = [sys.executable, str(PROJECT / "train.py"), f"resume={run}", "trainer.devices=1"]
        refused = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=300)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert f"a DeepSpeed checkpoint of {processes} processes, and this run has 1" in refused.stderr
        assert checkpoint_step(last) == saved
    resumed = [f"trainer.max_epochs={epochs}", "ckpt_path=last"]
    _result, weights = train_deepspeed(tmp_path, "deepspeed_stage_2", processes, *resumed)
    assert [w["global_step"] for w in weights] == [epochs * 4] * processes
    steps = [int(step) for step in saves.read_text().split()]
    assert steps == sorted(steps), "global_step went back"


def test_a_kill_during_a_save_leaves_the_previous_checkpoint_whole(tmp_path):
    """DeepSpeed wrote last.ckpt/ in place: killed mid-save, it held new and old shards (or empty
    files), and a resume failed with DeepSpeed's traceback. Now the save goes into a .partial
    folder that replaces last.ckpt/ once whole, and the next start removes what a kill left."""
    run = tmp_path / "outputs" / "zero"
    last = run / "checkpoints" / "last.ckpt"
    kill = [f"+callbacks.kill._target_={__name__}.KilledDuringSave", "+callbacks.kill.step=6"]
    killed = [*kill, f"+callbacks.kill.path={last}"]
    command = [sys.executable, str(PROJECT / "train.py"), *FAST, "strategy=deepspeed_stage_2", *CPU_DEEPSPEED]
    command += ["trainer.accelerator=cpu", f"output_root={run.parent}", "run_id=zero", "trainer.max_epochs=3", *killed]
    env = {**project_env(), "DS_ACCELERATOR": "cpu"}
    result = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 137, result.stderr
    assert checkpoint_step(last) == 4  # the end of epoch 1, whole
    assert (last.parent / "last.ckpt.partial").is_dir()  # what the kill cut short
    result, weights = train_deepspeed(tmp_path, "deepspeed_stage_2", 1, "trainer.max_epochs=2", "ckpt_path=last")
    assert [w["global_step"] for w in weights] == [8]
    assert checkpoint_step(last) == 8 and not list(last.parent.glob("*.partial"))
