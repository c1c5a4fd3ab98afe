"""The fast-path switches (`speed:` in configs/train.yaml, src/.../speed.py): bad values and
strategies that cannot compile stop with one line; CPU runs stay float32; compile trains."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from hydra import compose, initialize_config_dir

from {{ cookiecutter.package_name }}.launch.environment import register_resolvers
from {{ cookiecutter.package_name }}.launch.errors import SetupError
from {{ cookiecutter.package_name }}.launch.warnings import quiet_benign_messages
from {{ cookiecutter.package_name }}.speed import check_fused, check_speed, set_matmul_precision, trains_on_gpu

from tests.helpers import FAST, PROJECT, project_env, run_train


def composed(*overrides: str):
    register_resolvers()
    with initialize_config_dir(config_dir=str(PROJECT / "configs"), version_base="1.3"):
        return compose("train", overrides=list(overrides))


NO_COMPILE = ["deepspeed_stage_2", "deepspeed_stage_3_offload", "fsdp2", "horovod", "ddp_spawn"]


@pytest.mark.parametrize("strategy", NO_COMPILE)
def test_compile_is_refused_where_it_cannot_run(strategy):
    cfg = composed(f"strategy={strategy}", "speed.compile=default")
    with pytest.raises(SetupError, match=rf"speed.compile=default cannot be used with strategy={strategy}: .*Fix: "):
        check_speed(cfg.speed, cfg.strategy)


@pytest.mark.parametrize("strategy", ["auto", "ddp", "fsdp"])
def test_compile_is_accepted_where_lightning_compiles(strategy):
    cfg = composed(f"strategy={strategy}", "speed.compile=reduce-overhead")
    check_speed(cfg.speed, cfg.strategy)


BAD_VALUES = {
    "speed.compile=fast": "speed.compile=fast is neither false nor a torch.compile mode",
    "speed.compile=true": "speed.compile=True is neither false nor a torch.compile mode",
    "speed.matmul_precision=low": "speed.matmul_precision=low is not one of highest, high, medium",
    "speed.cudnn_benchmark=maybe": "speed.cudnn_benchmark=maybe is not true or false",
    "model.optimizer.fused=maybe": "model.optimizer.fused=maybe is not true, false or auto",
}


@pytest.mark.parametrize("override", BAD_VALUES)
def test_bad_values_name_key_value_and_fix(override):
    cfg = composed(override)
    with pytest.raises(SetupError, match="Fix: ") as error:
        check_speed(cfg.speed, cfg.strategy)
        check_fused(cfg.model)
    assert BAD_VALUES[override] in str(error.value)
    assert "\n" not in str(error.value)


def test_refusal_through_train_py_is_one_line():
    command = [sys.executable, "train.py", "strategy=fsdp2", "speed.compile=default", "trainer.accelerator=cpu"]
    result = subprocess.run(command, cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and "Fix: speed.compile=false, or strategy=ddp" in errors[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "cluster, precision",
    [("local", "32-true"), ("localslurm", "32-true"), ("mahti", "bf16-mixed"), ("lumi", "bf16-mixed")]
    + [("puhti", "16-mixed"), ("palmetto", "16-mixed"), ("narvi", "16-mixed"), ("generic", "16-mixed")],
)
def test_precision_follows_the_cluster_profile(cluster, precision):
    cfg = composed(f"cluster={cluster}")
    assert cfg.trainer.precision == precision
    assert cfg.trainer.benchmark is True  # speed.cudnn_benchmark


def test_cpu_runs_keep_float32_matmuls():
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        quiet_benign_messages()  # as run.py does before it builds the Trainer
        trainer = pl.Trainer(accelerator="cpu", logger=False)
        set_matmul_precision(composed().speed, on_gpu=trains_on_gpu(trainer))
        assert torch.get_float32_matmul_precision() == "highest"
        set_matmul_precision(composed().speed, on_gpu=True)
        assert torch.get_float32_matmul_precision() == "high"  # the default: TF32
    finally:
        torch.set_float32_matmul_precision(before)


class RecordCompiled(pl.Callback):
    """Test-only: writes whether the model's call was compiled and ran compiled, and the steps taken."""

    def __init__(self, path: str):
        self.path = Path(path)

    def on_train_end(self, trainer, pl_module):
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]  # what torch.compile made in this process
        compiled = pl_module._compiled_call_impl is not None and graphs > 0
        record = {"compiled": compiled, "global_step": trainer.global_step}
        self.path.write_text(json.dumps(record))


def test_compile_trains_under_ddp(tmp_path):
    record = tmp_path / "record.json"
    run_train(
        *FAST,
        "model=autoencoder",
        "model.net.hidden=16",
        "strategy=ddp",
        "trainer.accelerator=cpu",
        "trainer.devices=1",
        "trainer.limit_val_batches=0",
        "speed.compile=default",
        f"output_root={tmp_path}",
        "+callbacks.record._target_=tests.test_speed.RecordCompiled",
        f"+callbacks.record.path={record}",
        timeout=600,
    )
    assert json.loads(record.read_text()) == {"compiled": True, "global_step": 4}
