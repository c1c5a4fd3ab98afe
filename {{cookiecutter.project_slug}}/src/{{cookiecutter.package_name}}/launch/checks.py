"""Checks that run before training, in every rank, so that known mistakes stop at once
with a message that says how to fix them (instead of a traceback, or a hang later).
"""

import importlib
import importlib.util
import json
import os
import re
from pathlib import Path

from omegaconf import DictConfig

from ..speed import check_fused, check_speed
from .errors import SetupError
from .topology import check_topology


def _missing(package: str) -> bool:
    return importlib.util.find_spec(package) is None


def _deepspeed_op_error(builder_name: str) -> str | None:
    """Load one of DeepSpeed's ops (compiling it on first use, into the torch extensions cache);
    on failure the line that says why, e.g. no compiler or no CUDA toolkit."""
    try:
        builder = getattr(importlib.import_module("deepspeed.ops.op_builder"), builder_name)
        builder().load()
    except Exception as error:  # a failed compile raises RuntimeError, CalledProcessError, ...
        lines = str(error).strip().splitlines() or [type(error).__name__]
        # A failed compile's message is the whole build log: show the compiler's complaint.
        return next((line for line in lines if re.search(r"error:|not found|No such file", line)), lines[-1])
    return None


def check_strategy(strategy: DictConfig, cuda_available: bool) -> None:
    name = strategy.name
    needs = strategy.get("requires") or {}
    missing = [package for package in needs.get("packages") or [] if _missing(package)]
    if needs.get("cuda") and not cuda_available:
        # Not installed either: say so too, or the user finds out only on the GPU node.
        install = f" It also needs '{missing[0]}', which is not installed: {needs.install}" if missing else ""
        raise SetupError(
            f"strategy={name} runs only on CUDA/ROCm GPUs, and no GPU is visible here "
            "(torch.cuda.is_available() is False).\n"
            f"Fix: run it on a GPU node, e.g. `sbatch scripts/run-gpu1.sh strategy={name}`, "
            f"or use strategy=ddp on CPUs.{install}"
        )
    if missing:
        raise SetupError(
            f"strategy={name} needs the '{missing[0]}' package, which is not installed.\n"
            f"Fix: {needs.install}   (or pick another strategy, e.g. strategy=ddp)"
        )
    for module in needs.get("imports") or []:  # installed, but built for another torch?
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise SetupError(
                f"strategy={name} needs '{module}', which is installed but does not import: {error}\n"
                f"Fix: {needs.install}   (again, with the torch you train with)"
            ) from error
    for op in needs.get("ops") or []:  # DeepSpeed's C++ ops: prebuilt at install, or compiled now
        reason = _deepspeed_op_error(op)
        if reason:
            raise SetupError(
                f"strategy={name} needs DeepSpeed's C++ op {op}, which was not built at install "
                f"and does not compile here: {reason}\n"
                "Fix: a C++ compiler compiles it on first use (on GPU nodes with the CUDA toolkit, e.g. "
                f"`module load gcc cuda`); or build it at install: {needs.install}"
            )
    config_file = strategy.instance.get("config") if isinstance(strategy.get("instance"), DictConfig) else None
    if isinstance(config_file, str) and not Path(config_file).is_file():
        raise SetupError(
            f"strategy={name}: the config file {config_file} does not exist (relative to {Path.cwd()}).\n"
            f"Fix: strategy.instance.config=path/to/ds_config.json"
        )
    if isinstance(config_file, str):
        _check_deepspeed_json(name, config_file)


def _check_deepspeed_json(name: str, config_file: str) -> None:
    """What DeepSpeed or Lightning would refuse in the JSON once the processes had started (tracebacks)."""
    try:
        settings = json.loads(Path(config_file).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise SetupError(
            f"strategy={name}: the config file {config_file} is not JSON that can be read ({error}).\n"
            "Fix: a DeepSpeed config (configs/deepspeed/ds_config.json shows one)"
        ) from None
    if not isinstance(settings, dict):
        raise SetupError(
            f"strategy={name}: the config file {config_file} holds a JSON {type(settings).__name__}, not an object "
            "of DeepSpeed settings.\nFix: a DeepSpeed config (configs/deepspeed/ds_config.json shows one)"
        )
    if "gradient_accumulation_steps" in settings:
        raise SetupError(
            f"strategy={name}: {config_file} sets gradient_accumulation_steps, which Lightning sets itself "
            f"(and refuses there).\nFix: remove it from the file; trainer.accumulate_grad_batches="
            f"{settings['gradient_accumulation_steps']} instead"
        )


# Set by horovodrun (HOROVOD_RANK) or by MPI (mpirun, srun --mpi=pmix): Horovod can find its peers.
_HOROVOD_LAUNCH_VARIABLES = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")


def _instance_setting(strategy: DictConfig, key: str):
    """A setting of the strategy's class (strategy.instance.<key>); None where the instance is a name (auto)."""
    instance = strategy.get("instance")
    return instance.get(key) if isinstance(instance, DictConfig) else None


def check_launcher(strategy: DictConfig, devices, num_nodes) -> None:
    """Strategies whose ranks meet through MPI (Horovod) must be started by MPI or horovodrun, or
    each process would quietly train by itself: train.py alone, or srun without --mpi. One that
    spawns its processes (ddp_spawn) must not be started by a launcher: each would spawn more."""
    processes = devices * num_nodes if isinstance(devices, int) and isinstance(num_nodes, int) else 1
    start = _instance_setting(strategy, "start_method") or "popen"
    launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in os.environ else "srun" if "SLURM_STEP_ID" in os.environ else ""
    if start != "popen" and launcher and int(os.environ.get("WORLD_SIZE", os.environ.get("SLURM_NTASKS", 1))) > 1:
        raise SetupError(
            f"strategy={strategy.name} starts the processes itself (start_method={start}), but {launcher} has "
            f"started them already: each would start its own. Fix: strategy=ddp, which takes those {launcher} started"
        )
    launched = any(variable in os.environ for variable in _HOROVOD_LAUNCH_VARIABLES)
    if not strategy.get("mpi") or processes == 1 or launched:
        return
    name = strategy.name
    if "SLURM_STEP_ID" in os.environ and "SLURM_PROCID" in os.environ:
        reason = "but srun started them without MPI"
        fix = f"srun --mpi=pmix python train.py strategy={name} ...   (as the scripts rendered for strategy={name} do)"
    else:
        reason = "not train.py"
        fix = f"horovodrun -np {processes} python train.py strategy={name} ...   (in a Slurm job: srun --mpi=pmix ...)"
    raise SetupError(
        f"strategy={name} with {processes} processes: Horovod starts the processes through MPI, {reason}.\nFix: {fix}"
    )


def check_accelerator(accelerator: str, cuda_available: bool) -> None:
    if accelerator in ("gpu", "cuda") and not cuda_available:
        raise SetupError(
            f"trainer.accelerator={accelerator} but no GPU is visible here.\n"
            "Fix: run on a GPU node, or use cluster=local (CPU) / trainer.accelerator=cpu."
        )


def check_sync_batchnorm(sync_batchnorm: bool, accelerator: str, cuda_available: bool) -> None:
    # torch's SyncBatchNorm has no CPU implementation: DDP would fail later with a bare ValueError.
    if sync_batchnorm and (accelerator == "cpu" or not cuda_available):
        raise SetupError(
            "trainer.sync_batchnorm=true works only on GPUs (torch's SyncBatchNorm has no CPU version).\n"
            "Fix: drop the override on CPUs, or run on GPUs."
        )


def check_backend(strategy: DictConfig, accelerator: str, cuda_available: bool) -> None:
    # NCCL runs on GPUs only: on CPUs torch stopped each rank with a traceback once the run's folder was made.
    backend = _instance_setting(strategy, "process_group_backend")
    if backend == "nccl" and (accelerator == "cpu" or not cuda_available):
        raise SetupError(
            "strategy.instance.process_group_backend=nccl: NCCL runs on NVIDIA GPUs only, and this run trains on "
            "CPUs. Fix: drop it (Lightning picks gloo on CPUs), or strategy.instance.process_group_backend=gloo"
        )


def check_logger(logger: DictConfig | None) -> None:
    if logger is not None and "Wandb" in logger.get("_target_", "") and _missing("wandb"):
        raise SetupError(
            "logger=wandb needs the 'wandb' package.\nFix: pip install -e '.[wandb]'   (or logger=tensorboard)"
        )


def check_environment(cfg: DictConfig) -> None:
    import torch

    cuda_available = torch.cuda.is_available()
    visible_gpus = torch.cuda.device_count() if cuda_available else 0
    check_topology(cfg.trainer.devices, cfg.trainer.num_nodes, cfg.trainer.accelerator, visible_gpus)
    check_strategy(cfg.strategy, cuda_available)
    check_launcher(cfg.strategy, cfg.trainer.devices, cfg.trainer.num_nodes)
    check_accelerator(cfg.trainer.accelerator, cuda_available)
    check_sync_batchnorm(cfg.trainer.sync_batchnorm, cfg.trainer.accelerator, cuda_available)
    check_backend(cfg.strategy, cfg.trainer.accelerator, cuda_available)
    check_logger(cfg.get("logger"))
    check_speed(cfg.speed, cfg.strategy)
    check_fused(cfg.model)


def check_test_stage(model, datamodule, test_after_fit: bool) -> None:
    """test_after_fit=true where the model or data has no test: Lightning finds it only in
    trainer.test, after all the training, with a traceback."""
    from pytorch_lightning.utilities.model_helpers import is_overridden

    if not test_after_fit:
        return
    for hook, owner in (("test_step", model), ("test_dataloader", datamodule)):
        if not is_overridden(hook, owner):
            raise SetupError(
                f"test_after_fit=true: {type(owner).__name__} has no {hook}, so there would be nothing to test "
                f"after the training. Fix: test_after_fit=false, or write its {hook}"
            )


def check_epoch_length(trainer, batches: dict[str, int | None]) -> None:
    """The Trainer's per-epoch settings against the batches each process gets of each set the run
    uses (`batches["train"]`, "val", and "test" where it tests; None: unknown until the data is set
    up). Lightning checks these only once a loop starts (the test loop after all the training),
    with a traceback; the same rules (its loops' setup_data), on the values it resolved from the
    arguments (fast_dev_run and overfit_batches set the limits and val_check_interval)."""
    for stage, count in batches.items():
        check_batch_limit(trainer, stage, count)
    train_batches, limit = batches["train"], trainer.limit_train_batches
    if limit == 0:  # no training, so Lightning checks nothing
        return
    if train_batches is None:  # unknown until the data is set up
        check_validation_runs(trainer, None)
        return
    limited = min(train_batches, limit) if isinstance(limit, int) else int(train_batches * limit)
    trained = f"the {limited} training batches each process gets in an epoch"
    if limited < train_batches:
        trained += f" ({_limit_key(trainer, 'train')}={limit})"
    interval = getattr(trainer, "val_check_interval", None)  # Lightning sets none for a time ("00:00:10:00")
    if isinstance(interval, int) and interval > limited and trainer.check_val_every_n_epoch is not None:
        raise SetupError(
            f"trainer.val_check_interval={interval}: more than {trained}, so validation would never run. "
            f"Fix: +trainer.val_check_interval={limited} or less, a fraction "
            "of the epoch (e.g. 0.25), or +trainer.check_val_every_n_epoch=null to count the batches across epochs"
        )
    check_validation_runs(trainer, limited)


def check_validation_runs(trainer, batches_per_epoch: int | None) -> None:
    """Validation at least once in the run's max_epochs: else no val/loss, no best checkpoint, no
    divergence check, and exit 0 (as a val_check_interval longer than an epoch, above).
    batches_per_epoch: each process's training batches (None: unknown until the data is set up)."""
    epochs, every = trainer.max_epochs, trainer.check_val_every_n_epoch
    interval = getattr(trainer, "val_check_interval", None)
    if trainer.limit_val_batches == 0 or epochs in (None, -1):
        return  # no validation asked for, or no end in epochs
    if every is not None and every > epochs:
        raise SetupError(
            f"trainer.check_val_every_n_epoch={every}: more than the run's {epochs} epoch(s) (trainer.max_epochs), "
            f"so validation would never run. Fix: +trainer.check_val_every_n_epoch={epochs} or less, or "
            f"trainer.max_epochs={every} or more"
        )
    if every is None and isinstance(interval, int) and batches_per_epoch and interval > batches_per_epoch * epochs:
        raise SetupError(
            f"trainer.val_check_interval={interval}: more than the run's {batches_per_epoch * epochs} training batches "
            f"({epochs} epoch(s) of {batches_per_epoch}), so validation would never run. "
            f"Fix: +trainer.val_check_interval={batches_per_epoch * epochs} or less"
        )


def check_batch_limit(trainer, stage: str, batches: int | None) -> None:
    """A fraction of the batches (limit_train_batches=0.01) must come to at least one."""
    limit = getattr(trainer, f"limit_{stage}_batches")
    if batches and isinstance(limit, float) and limit > 0 and int(batches * limit) == 0:
        key = _limit_key(trainer, stage)
        name = {"train": "training", "val": "validation", "test": "test"}[stage]
        epoch = " in an epoch" if stage == "train" else ""
        fraction = f", or a fraction of at least 1/{batches}" if batches > 1 else ""
        raise SetupError(
            f"{key}={limit}: less than one of the {batches} {name} batches each process gets{epoch}. "
            "Fix: a number of batches, "
            f"e.g. {'+' if key in ADDED_LIMITS else ''}{key}=1{fraction}"
        )


ADDED_LIMITS = ("trainer.overfit_batches", "trainer.limit_test_batches")  # not in configs/trainer/: set with +


def _limit_key(trainer, stage: str) -> str:
    """The setting the user gave: overfit_batches sets Lightning's train and val limits."""
    if stage != "test" and trainer.overfit_batches > 0:
        return "trainer.overfit_batches"
    return f"trainer.limit_{stage}_batches"
