"""`python train.py strategy=X` stops with a clear message, before training, wherever X cannot run."""

import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir

from {{ cookiecutter.package_name }}.launch.checks import check_launcher, check_strategy
from {{ cookiecutter.package_name }}.launch.environment import register_resolvers
from {{ cookiecutter.package_name }}.launch.errors import SetupError

from tests.helpers import PROJECT, project_env

register_resolvers()


def strategy_config(name: str, *overrides: str):
    with initialize_config_dir(config_dir=str(PROJECT / "configs"), version_base="1.3"):
        return compose("train", overrides=[f"strategy={name}", *overrides, "output_dir=/tmp/run"]).strategy


def train_py(*overrides: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(PROJECT / "train.py"), *overrides],
        cwd=PROJECT,
        env=project_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_horovod_without_its_launcher_names_horovodrun(monkeypatch):
    for name in ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_STEP_ID", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SetupError, match=r"(?s)Horovod starts the processes.*horovodrun -np 4 python train.py"):
        check_launcher(strategy_config("horovod"), devices=2, num_nodes=2)
    check_launcher(strategy_config("horovod"), devices=1, num_nodes=1)  # one process: nothing to launch
    monkeypatch.setenv("HOROVOD_RANK", "0")
    check_launcher(strategy_config("horovod"), devices=2, num_nodes=1)  # started by horovodrun


def test_horovod_under_srun_needs_its_mpi_option(monkeypatch):
    """srun without --mpi starts the tasks, but each one would be an MPI world of its own."""
    for name in ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_STEP_ID", "0")
    monkeypatch.setenv("SLURM_PROCID", "1")
    with pytest.raises(SetupError, match=r"(?s)srun started them without MPI.*Fix: srun --mpi=pmix python train.py"):
        check_launcher(strategy_config("horovod"), devices=1, num_nodes=2)
    monkeypatch.setenv("PMIX_RANK", "1")  # what srun --mpi=pmix sets
    check_launcher(strategy_config("horovod"), devices=1, num_nodes=2)


def test_ddp_is_launched_by_lightning_itself():
    check_launcher(strategy_config("ddp"), devices=2, num_nodes=1)


@pytest.mark.parametrize(
    ("launcher", "variables"),
    [
        ("torchrun", {"TORCHELASTIC_RUN_ID": "1", "WORLD_SIZE": "2"}),
        ("srun", {"SLURM_STEP_ID": "0", "SLURM_NTASKS": "2"}),
    ],
)
def test_ddp_spawn_started_by_a_launcher_names_ddp(launcher, variables, monkeypatch):
    """Each process the launcher started spawned its own: gloo's "Connection reset by peer", or
    EADDRINUSE, in a traceback once the run's folder was made."""
    for name in ("TORCHELASTIC_RUN_ID", "WORLD_SIZE", "SLURM_STEP_ID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    check_launcher(strategy_config("ddp_spawn"), devices=2, num_nodes=1)  # Lightning spawns them: its purpose
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SetupError, match=rf"ddp_spawn starts the processes itself .*, but {launcher} has started"):
        check_launcher(strategy_config("ddp_spawn"), devices=2, num_nodes=1)
    check_launcher(strategy_config("ddp"), devices=2, num_nodes=1)
    check_launcher(strategy_config("auto"), devices=2, num_nodes=1)  # its instance is a name, not settings


def json_only(strategy):
    """The strategy's JSON file checked alone, whether DeepSpeed is installed here or not."""
    for need in ("packages", "imports", "ops"):
        if need in strategy.requires:
            strategy.requires[need] = []
    return strategy


def test_missing_deepspeed_json_names_the_override(tmp_path):
    strategy = json_only(strategy_config("deepspeed_json", f"strategy.instance.config={tmp_path / 'nope.json'}"))
    with pytest.raises(SetupError, match=r"(?s)nope.json does not exist.*Fix: strategy.instance.config="):
        check_strategy(strategy, cuda_available=True)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"gradient_accumulation_steps": 4}', r"sets gradient_accumulation_steps, (?s:.*)accumulate_grad_batches=4"),
        ('{"zero_optimization": ', r"is not JSON that can be read \(Expecting value"),
        ("[1, 2]", r"holds a JSON list, not an object of DeepSpeed settings"),
    ],
)
def test_a_deepspeed_json_that_would_be_refused_later_stops_with_one_line(content, message, tmp_path):
    """Before: DeepSpeed's or Lightning's traceback from every process once training had begun."""
    config = tmp_path / "ds_config.json"
    config.write_text(content)
    strategy = json_only(strategy_config("deepspeed_json", f"strategy.instance.config={config}"))
    with pytest.raises(SetupError, match=r"^strategy=deepspeed_json: .*" + message):
        check_strategy(strategy, cuda_available=True)


def test_shipped_deepspeed_json_is_found():
    check_strategy(json_only(strategy_config("deepspeed_json")), cuda_available=True)  # run from the project root


def test_package_that_does_not_import_names_the_install_command():
    strategy = strategy_config("horovod")
    strategy.requires.packages = []
    strategy.requires.imports = ["surely_not_an_importable_module"]
    with pytest.raises(SetupError, match=r"(?s)does not import.*Fix: bash scripts/install-horovod.sh"):
        check_strategy(strategy, cuda_available=True)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["strategy=deepspeed_stage_3"], "ERROR: strategy=deepspeed_stage_3 runs only on CUDA/ROCm GPUs"),
        (
            ["strategy=deepspeed_stage_3_offload"],
            "ERROR: strategy=deepspeed_stage_3_offload runs only on CUDA/ROCm GPUs",
        ),
        (["strategy=horovod", "trainer.devices=2"], "Fix: horovodrun -np 2 python train.py strategy=horovod"),
    ],
    ids=["deepspeed-on-cpu", "deepspeed-offload-on-cpu", "horovod-without-horovodrun"],
)
def test_train_py_refuses_what_cannot_run_here(overrides, message, tmp_path):
    if "strategy=horovod" in overrides:
        pytest.importorskip("horovod.torch")  # else the message is the install command
    result = train_py(*overrides, "trainer.accelerator=cpu", f"output_root={tmp_path}", CUDA_VISIBLE_DEVICES="")
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_every_gpu_only_strategy_is_refused_without_a_gpu():
    names = sorted(p.stem for p in (PROJECT / "configs" / "strategy").glob("*.yaml"))
    gpu_only = [name for name in names if (strategy_config(name).get("requires") or {}).get("cuda")]
    assert {"deepspeed_stage_1", "deepspeed_stage_3_offload", "fsdp"} <= set(gpu_only)
    for name in gpu_only:
        with pytest.raises(SetupError, match=rf"(?s)strategy={name} runs only on CUDA/ROCm GPUs.*Fix: "):
            check_strategy(strategy_config(name), cuda_available=False)


def test_deepspeed_op_that_does_not_compile_names_the_install_command(tmp_path):
    """ZeRO-Offload's CPU Adam is compiled before training, so a missing compiler stops the run at once."""
    pytest.importorskip("deepspeed")
    from deepspeed.git_version_info import installed_ops

    if installed_ops.get("cpu_adam"):
        pytest.skip("DeepSpeed was installed with CPU Adam built in (DS_BUILD_CPU_ADAM=1): nothing to compile")
    result = train_py(
        "strategy=deepspeed_stage_3_offload",
        "strategy.requires.cuda=false",  # as if on a GPU node: the op check comes next
        "trainer.accelerator=cpu",
        f"output_root={tmp_path}",
        CXX="/nonexistent/g++",
        TORCH_EXTENSIONS_DIR=str(tmp_path / "torch_extensions"),  # not the cache, where it may be built
    )
    assert result.returncode == 2, result.stderr
    assert "needs DeepSpeed's C++ op CPUAdamBuilder" in result.stderr
    assert "/nonexistent/g++: not found" in result.stderr
    assert "Fix: a C++ compiler compiles it on first use" in result.stderr
    assert "DS_BUILD_CPU_ADAM=1 pip install --no-build-isolation" in result.stderr
    assert "Traceback" not in result.stderr
