"""A resume trains with the optimizer settings of its config.

Lightning restores an optimizer's parameter groups from the checkpoint, its settings with them,
so `python train.py resume=<run> model.optimizer.lr=1e-4` ran on with the old lr and said
nothing. run.py finds the settings the config changes (launch/resume_checks.py: check_checkpoint_fits)
and gives them to this callback, which sets them once the state is restored; the optimizer's
state (Adam's moments, its step count) stays the checkpoint's.
"""

import pytorch_lightning as pl
from pytorch_lightning.utilities import rank_zero_info


class OptimizerSettingsFromConfig(pl.Callback):
    def __init__(self, changes: dict[int, dict[str, tuple]]):
        self.changes = changes  # optimizer index -> {setting: (the checkpoint's value, the config's)}

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        for index, settings in self.changes.items():
            for group in trainer.optimizers[index].param_groups:
                group.update({key: configured for key, (_saved, configured) in settings.items()})
            shown = ", ".join(f"{key} {saved} -> {configured}" for key, (saved, configured) in settings.items())
            rank_zero_info(f"Resumed with the config's optimizer settings: {shown}")
