"""Build the model, data and Trainer from the composed config, then train."""

import pytorch_lightning as pl
from hydra.utils import instantiate
from omegaconf import DictConfig
from pytorch_lightning.utilities import rank_zero_info

from .launch.checks import check_environment
from .speed import compiled, set_matmul_precision, trains_on_gpu


def build_strategy(cfg: DictConfig):
    instance = cfg.strategy.instance
    if isinstance(instance, str):  # a name Lightning knows, such as "auto"
        return instance
    return instantiate(instance, _convert_="object")


def build_trainer(cfg: DictConfig) -> pl.Trainer:
    callbacks = [instantiate(callback) for callback in cfg.callbacks.values()]
    logger = instantiate(cfg.logger) if cfg.get("logger") else False
    return instantiate(cfg.trainer, strategy=build_strategy(cfg), callbacks=callbacks, logger=logger)


def run(cfg: DictConfig) -> pl.Trainer:
    check_environment(cfg)
    pl.seed_everything(cfg.seed, workers=True)
    datamodule = instantiate(cfg.data)
    model = instantiate(cfg.model)
    trainer = build_trainer(cfg)
    set_matmul_precision(cfg.speed, on_gpu=trains_on_gpu(trainer))
    model = compiled(cfg.speed, model)
    rank_zero_info(f"Run directory (shared by all ranks): {cfg.output_dir}")
    trainer.fit(model, datamodule=datamodule, ckpt_path=cfg.ckpt_path)
    if cfg.test_after_fit:
        trainer.test(model, datamodule=datamodule)
    return trainer
