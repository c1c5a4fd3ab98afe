"""Build the model, data and Trainer from the composed config, then train."""

import os
from pathlib import Path

import pytorch_lightning as pl
from hydra.utils import instantiate
from omegaconf import DictConfig
from pytorch_lightning.utilities import rank_zero_info
from pytorch_lightning.utilities.exceptions import SIGTERMException

from .callbacks.checkpoints import write_forward_only
from .callbacks.monitored_metrics import MonitoredMetricsLogged
from .callbacks.optimizer_settings import OptimizerSettingsFromConfig
from .callbacks.start_record import StartRecord
from .callbacks.stop import stop_exit_code
from .data.resumable import run_seed
from .hook_costs import (
    NoProfiler,
    cuda_availability_cached,
    read_step_signatures_once,
    skip_empty_batch_hooks,
    store_hook_names_directly,
)
from .launch.checks import check_environment, check_epoch_length, check_test_stage
from .launch.environment import restarted
from .launch.errors import TIME_LIMIT_EXIT, SetupError
from .launch.resume_checks import (
    StartCheckpoint,
    check_checkpoint_fits,
    check_checkpoint_format,
    check_deepspeed_world_size,
    check_epochs_left,
    check_mid_epoch_batches,
    check_same_split,
    check_time_left,
    ended_early,
    epochs_done,
    stopped_by_time_limit,
    training_ended,
)
from .launch.run_directory import (
    checkpoint_to_resume,
    paths_in,
    release,
    remove_made_since,
    resume_command,
    shown,
    this_start_subdir,
)
from .launch.sweeps import check_multirun
from .launch.warnings import quiet_benign_messages
from .speed import compiled, set_matmul_precision, trains_on_gpu


def one_process(cfg: DictConfig) -> bool:
    """One device on one node, and no launcher (torchrun) that started more processes."""
    devices = cfg.trainer.devices
    return str(devices) == "1" and cfg.trainer.num_nodes == 1 and int(os.environ.get("WORLD_SIZE", 1)) == 1


def build_strategy(cfg: DictConfig):
    instance = cfg.strategy.instance
    if cfg.strategy.name in ("ddp", "ddp_spawn") and one_process(cfg):
        # DDP of one process only adds per-step cost (its wrapper, the all-reduce with
        # itself): Lightning's single-device strategy trains the same model the same way.
        rank_zero_info(f"strategy={cfg.strategy.name} on one process: trained without DDP (one device)")
        return "auto"
    if isinstance(instance, str):  # a name Lightning knows, such as "auto"
        return instance
    return instantiate(instance, _convert_="object")


def build_trainer(cfg: DictConfig) -> pl.Trainer:
    callbacks = [instantiate(callback) for callback in cfg.callbacks.values()]
    # Lightning calls every callback on every hook of every step: those with nothing to do
    # in this run (`applies` false, e.g. the Slurm requeue outside srun) stay out.
    callbacks = [callback for callback in callbacks if getattr(callback, "applies", True)]
    monitors = {f"callbacks.{key}.monitor": each.monitor for key, each in cfg.callbacks.items() if each.get("monitor")}
    if monitors and cfg.trainer.num_sanity_val_steps:
        callbacks.append(MonitoredMetricsLogged(monitors))  # at the sanity check, before any training step
    start = this_start_subdir()
    if start:  # rank 0's checkpoints name the start that wrote them (for resume=)
        callbacks.append(StartRecord(start))
    logger = instantiate(cfg.logger) if cfg.get("logger") else False
    profiler = cfg.trainer.get("profiler") or NoProfiler()
    strategy = build_strategy(cfg)
    # Lightning checks its arguments together (launch/values.py checks each, and the known clashes);
    # a refusal is one line (train.py, as for every class of the config).
    # _convert_: Lightning takes {minutes: 5} for max_time and val_check_interval as a dict, not Hydra's DictConfig
    trainer = instantiate(
        cfg.trainer, strategy=strategy, callbacks=callbacks, logger=logger, profiler=profiler, _convert_="all"
    )
    skip_empty_batch_hooks(trainer.callbacks)  # also those Lightning added (model summary)
    background = any(getattr(callback, "write_in_background", False) for callback in trainer.callbacks)
    write_forward_only(trainer, background)
    return trainer


def processes(trainer: pl.Trainer) -> int:
    """The number of training processes; under Horovod (which knows it only once started) 1."""
    try:
        return trainer.world_size
    except (RuntimeError, ValueError):
        return 1


def processes_key(trainer: pl.Trainer) -> str:
    """What sets the number of processes, for a fix: Horovod's ranks are started outside Lightning."""
    if getattr(trainer.strategy, "strategy_name", None) == "horovod":
        return "horovodrun -np, or srun's tasks"
    return "trainer.devices"


def optimizer_settings(cfg: DictConfig) -> list[str]:
    """The settings model.optimizer gives the optimizer (lr, weight_decay, ...), not how it runs (fused)."""
    optimizer = cfg.model.get("optimizer") or {}
    return [str(key) for key in optimizer if not str(key).startswith("_") and key != "fused"]


def resume_from(cfg: DictConfig) -> str | None:
    """The checkpoint to start from; refuses a start that would overwrite a run's checkpoints."""
    return checkpoint_to_resume(cfg.ckpt_path, Path(cfg.output_dir), this_start_subdir())


def run(cfg: DictConfig) -> pl.Trainer:
    check_environment(cfg)
    quiet_benign_messages()
    ckpt_path = resume_from(cfg)  # from here rank 0 holds the run directory: no other start trains in it
    run_dir = Path(cfg.output_dir)
    before = paths_in(run_dir)
    try:
        return train(cfg, ckpt_path)
    except SetupError:  # refused before training; the loggers' first files too (train.py removes the rest)
        remove_made_since(run_dir, before)
        raise
    finally:
        release(run_dir)


def check_start(cfg: DictConfig, trainer: pl.Trainer, datamodule, start: StartCheckpoint) -> bool:
    """Whether the checkpoint can be resumed by this config (else SetupError), and whether its
    training has ended already, with only the test left to do."""
    check_time_left(trainer, start)
    check_deepspeed_world_size(trainer, start)  # first: on another number of processes nothing else matters
    # A requeue or torchrun restart after the training's end (a node failed while test_after_fit
    # tested), or a resume of a run stopped while it tested: what is left is the test, if any.
    # Before, the epochs check refused them (exit 2), and the test never ran.
    ended = training_ended(trainer, start) and (restarted() or cfg.test_after_fit)
    if not ended:
        check_epochs_left(trainer, start)
        check_same_split(datamodule, start)
        # the processes that share each epoch's order: without Lightning's distributed sampler each has all of it
        shares = processes(trainer) if cfg.trainer.get("use_distributed_sampler", True) else 1
        order = {"seed": run_seed(), "samples": getattr(datamodule, "train_samples", lambda: None)()}
        batch_size = getattr(datamodule, "batch_size", None)
        check_mid_epoch_batches(batch_size, shares, processes_key(trainer), start, order)
    return ended


def train(cfg: DictConfig, ckpt_path: str | None) -> pl.Trainer:
    check_checkpoint_format(ckpt_path, cfg.strategy)
    pl.seed_everything(cfg.seed, workers=True)
    datamodule = instantiate(cfg.data)
    model = instantiate(cfg.model)
    check_test_stage(model, datamodule, cfg.test_after_fit)
    store_hook_names_directly(model)
    read_step_signatures_once(model)
    start = StartCheckpoint(ckpt_path)
    changed = check_checkpoint_fits(model, start, optimizer_settings(cfg))
    trainer = build_trainer(cfg)
    check_multirun(cfg, processes(trainer), processes_key(trainer))
    ended = check_start(cfg, trainer, datamodule, start)
    early = ended and ended_early(start)
    del start  # its state maps the checkpoint's file: not held open while training
    if changed:  # a resume with other optimizer settings: Lightning would restore the old ones
        trainer.callbacks.append(OptimizerSettingsFromConfig(changed))
    ranks = processes(trainer)
    datamodule.check_enough_for(ranks, processes_key(trainer))
    stages = ("train", "val", "test") if cfg.test_after_fit else ("train", "val")
    check_epoch_length(trainer, {stage: datamodule.batches(stage, ranks) for stage in stages})
    on_gpu = trains_on_gpu(trainer)
    set_matmul_precision(cfg.speed, on_gpu)
    model = compiled(cfg.speed, model)
    rank_zero_info(f"Run directory (shared by all ranks): {cfg.output_dir}")
    with cuda_availability_cached(on_gpu):
        with stop_exit_code(trainer):  # SIGTERM, Ctrl-C: saved, then 143 / 130 (also while testing)
            if ended:
                left = "testing its weights" if cfg.test_after_fit else "nothing left to do"
                train_on = "a resume without test_after_fit=true" if early else "a larger trainer.max_epochs"
                how = "Restarted" if restarted() else f"Resumed ({train_on} trains on)"
                rank_zero_info(f"{how} after the training had ended ({shown(ckpt_path)}): {left}")
            else:
                trainer.fit(model, datamodule=datamodule, ckpt_path=ckpt_path)
                if stopped_by_time_limit(trainer):  # not finished: no test yet, and an exit code that says so
                    test = " (and then tests)" if cfg.test_after_fit else ""
                    rank_zero_info(
                        f"trainer.max_time ended the training at step {trainer.global_step} ({epochs_done(trainer)} "
                        f"whole epoch(s)), before its end; saved. To train on{test}: "
                        f"{resume_command(Path(cfg.output_dir))} +trainer.max_time=<a longer time for the whole run>"
                    )
                    raise SystemExit(TIME_LIMIT_EXIT)
            if cfg.test_after_fit:
                # A SIGTERM at the training's last save, where Lightning's handler took it: the test ran, exit 0.
                # Any rank's: the others would wait in the test's collectives for one that left.
                if trainer.strategy.reduce_boolean_decision(trainer.received_sigterm, all=False):
                    raise SIGTERMException  # stop_exit_code: the line that tests, exit 143
                trainer.test(model, datamodule=datamodule, ckpt_path=ckpt_path if ended else None)
    return trainer
