"""Say when a test on several ranks counts some of its samples twice.

Lightning gives each rank of a test an equal share of the test set through a DistributedSampler,
which fills the last shares with the set's first samples: the test metrics count those twice.
Lightning's own warning came with every test on several ranks, also where nothing was repeated,
and asked for `devices=1` (a run of its own); it is filtered (launch/warnings.py), and this line
says how many samples are repeated, where any are.
"""

import pytorch_lightning as pl
from pytorch_lightning.utilities import rank_zero_info
from torch.utils.data import DistributedSampler


def repeated_samples(loader) -> tuple[int, int]:
    """(samples the loader's DistributedSampler repeats, samples in the set); (0, 0) without one."""
    for sampler in (getattr(loader.batch_sampler, "sampler", None), loader.sampler):
        if isinstance(sampler, DistributedSampler):
            size = len(sampler.dataset)
            return (0 if sampler.drop_last else sampler.total_size - size), size
    return 0, 0


class TestRepeats(pl.Callback):
    def on_test_start(self, trainer, pl_module):
        loaders = trainer.test_dataloaders
        for loader in loaders if isinstance(loaders, list | tuple) else [loaders]:
            repeated, size = repeated_samples(loader)
            if repeated:
                rank_zero_info(
                    f"Test on {trainer.world_size} ranks: {repeated} of the {size} test samples are tested twice, "
                    "so that every rank gets as many (the test metrics count them twice; with a number of ranks "
                    f"that divides {size}, none)"
                )
