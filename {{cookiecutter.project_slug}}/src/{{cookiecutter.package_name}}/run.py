"""Build the model, data and Trainer from the composed config, then train."""

from pathlib import Path

import pytorch_lightning as pl
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig
from pytorch_lightning.utilities import rank_zero_info

from .callbacks.stop import stop_exit_code
from .launch.checks import check_environment
from .launch.run_directory import checkpoint_to_resume


def build_strategy(cfg: DictConfig):
    instance = cfg.strategy.instance
    if isinstance(instance, str):  # a name Lightning knows, such as "auto"
        return instance
    return instantiate(instance, _convert_="object")


def build_trainer(cfg: DictConfig) -> pl.Trainer:
    callbacks = [instantiate(callback) for callback in cfg.callbacks.values()]
    logger = instantiate(cfg.logger) if cfg.get("logger") else False
    return instantiate(cfg.trainer, strategy=build_strategy(cfg), callbacks=callbacks, logger=logger)


def resume_from(cfg: DictConfig) -> str | None:
    """The checkpoint to start from; refuses a start that would overwrite a run's checkpoints."""
    subdir = HydraConfig.get().output_subdir if HydraConfig.initialized() else None
    return checkpoint_to_resume(cfg.ckpt_path, Path(cfg.output_dir), subdir)


def run(cfg: DictConfig) -> pl.Trainer:
    check_environment(cfg)
    ckpt_path = resume_from(cfg)
    pl.seed_everything(cfg.seed, workers=True)
    datamodule = instantiate(cfg.data)
    model = instantiate(cfg.model)
    trainer = build_trainer(cfg)
    rank_zero_info(f"Run directory (shared by all ranks): {cfg.output_dir}")
    with stop_exit_code(trainer):  # SIGTERM, Ctrl-C: saved, then 143 / 130
        trainer.fit(model, datamodule=datamodule, ckpt_path=ckpt_path)
    if cfg.test_after_fit:
        trainer.test(model, datamodule=datamodule)
    return trainer
