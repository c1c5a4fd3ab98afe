"""Every config choice composes; choices this machine cannot run fail with the promised fix."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from {{ cookiecutter.package_name }}.launch.checks import check_backend, check_strategy, check_sync_batchnorm
from {{ cookiecutter.package_name }}.launch.environment import register_resolvers
from {{ cookiecutter.package_name }}.launch.errors import SetupError

from tests.helpers import PROJECT, run_train

CONFIGS = PROJECT / "configs"
register_resolvers()


def choices(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIGS / group).glob("*.yaml") if not p.stem.startswith("_"))


def composed(*overrides: str):
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        # The run directory is known only inside a Hydra run: give one.
        return compose("train", overrides=[*overrides, "output_dir=/tmp/run"])


@pytest.mark.parametrize("group", ["strategy", "cluster", "model", "data", "logger", "experiment"])
def test_every_choice_composes(group):
    for choice in choices(group):
        OmegaConf.resolve(composed(f"{group}={choice}"))


@pytest.mark.parametrize("strategy", choices("strategy"))
def test_strategy_names_itself(strategy):
    cfg = composed(f"strategy={strategy}")
    assert cfg.strategy.name == strategy


def test_gpu_only_strategies_refuse_cpu_with_the_fix():
    for strategy in ("deepspeed", "deepspeed_stage_1", "deepspeed_stage_3_offload", "fsdp"):
        cfg = composed(f"strategy={strategy}")
        with pytest.raises(SetupError, match="(?s)GPU.*Fix: run it on a GPU node") as error:
            check_strategy(cfg.strategy, cuda_available=False)
        assert f"strategy={strategy}" in str(error.value)


def test_missing_package_names_the_install_command():
    cfg = composed("strategy=horovod")
    cfg.strategy.requires.packages = ["surely_not_installed_package"]
    with pytest.raises(SetupError, match="(?s)surely_not_installed_package.*Fix: bash scripts/install-horovod.sh"):
        check_strategy(cfg.strategy, cuda_available=True)


def test_bad_choice_lists_the_valid_ones():
    with pytest.raises(ConfigCompositionException, match="(?s)Available options.*ddp.*fsdp"):
        composed("strategy=dpp")


def test_train_py_stops_with_the_message_not_a_traceback(tmp_path):
    import subprocess
    import sys

    from tests.helpers import project_env

    result = subprocess.run(
        [
            sys.executable,
            str(PROJECT / "train.py"),
            "strategy=fsdp",
            "trainer.accelerator=cpu",
            f"output_root={tmp_path}",
        ],
        cwd=PROJECT,
        env=project_env(CUDA_VISIBLE_DEVICES=""),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "ERROR: strategy=fsdp runs only on CUDA/ROCm GPUs" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_lists_groups():
    result = run_train("--help")
    assert "strategy: " in result.stdout and "cluster: " in result.stdout
    assert "\nhydra/launcher: local, slurm\n" in result.stdout  # sweeps here and on Slurm (a group inside hydra/)
    assert Path(PROJECT / "train.py").exists()


def test_sync_batchnorm_on_cpu_is_refused_with_the_reason():
    with pytest.raises(SetupError, match="works only on GPUs"):
        check_sync_batchnorm(True, "auto", cuda_available=False)
    check_sync_batchnorm(True, "gpu", cuda_available=True)
    check_sync_batchnorm(False, "cpu", cuda_available=False)


def test_nccl_on_cpus_is_refused_with_the_reason():
    """torch stopped each rank with a traceback, once the run's folder was made."""
    nccl = OmegaConf.create({"instance": {"process_group_backend": "nccl"}})
    with pytest.raises(SetupError, match=r"process_group_backend=nccl: NCCL runs on NVIDIA GPUs only.*=gloo$"):
        check_backend(nccl, "auto", cuda_available=False)
    check_backend(nccl, "gpu", cuda_available=True)
    check_backend(OmegaConf.create({"instance": {"process_group_backend": "gloo"}}), "cpu", cuda_available=False)
    for strategy in ("ddp", "auto"):  # auto's instance is a name, not settings
        check_backend(composed(f"strategy={strategy}").strategy, "cpu", cuda_available=False)
