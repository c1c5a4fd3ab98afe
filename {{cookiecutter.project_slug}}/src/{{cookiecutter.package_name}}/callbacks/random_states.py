"""Every rank's random state in each checkpoint: a resumed run draws the dropout masks (and the
other random numbers of its training steps) that the run would have drawn had it not stopped.

Lightning 2.6 saves none: a resumed run went on from the seed's state (or a requeued job from
wherever its start left it), and ended on other weights than an unstopped run. The states are
kept as tensors and plain values, so that the checkpoint still loads with weights_only=True.
(The loaders draw nothing from the global state: data/loaders.py gives them their own.)
"""

import pickle
import random

import numpy as np
import pytorch_lightning as pl
import torch

KEY = "random_states"


class RandomStates(pl.Callback):
    to_restore: dict | None = None

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        checkpoint[KEY] = every_ranks(trainer, current_states())  # every rank saves, at the same step

    def on_load_checkpoint(self, trainer, pl_module, checkpoint):
        saved = checkpoint.get(KEY)
        # With another number of ranks the states no longer fit: each rank goes on from its own.
        self.to_restore = saved[trainer.global_rank] if saved and len(saved) == trainer.world_size else None

    def on_train_start(self, trainer, pl_module):
        if self.to_restore is not None:
            restore(self.to_restore)
            self.to_restore = None


def current_states() -> dict:
    kind, keys, position, has_gauss, gauss = np.random.get_state()
    states = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, gauss),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state()  # this rank's device
    return states


def restore(states: dict) -> None:
    torch.set_rng_state(states["torch"])
    random.setstate(states["python"])
    kind, keys, position, has_gauss, gauss = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), position, has_gauss, gauss))
    if "cuda" in states and torch.cuda.is_available():  # a GPU run resumed on CPUs: nothing to restore there
        torch.cuda.set_rng_state(states["cuda"])


def every_ranks(trainer, value) -> list:
    """`value` of every rank, in rank order, through the strategy's all_gather (also Horovod's):
    pickled (in memory only, between the ranks of this run) and padded to the longest."""
    if trainer.world_size == 1:
        return [value]
    strategy, device = trainer.strategy, trainer.strategy.root_device
    data = torch.frombuffer(bytearray(pickle.dumps(value)), dtype=torch.uint8)
    sizes = strategy.all_gather(torch.tensor([len(data)], device=device)).flatten().tolist()
    padded = torch.zeros(max(sizes), dtype=torch.uint8, device=device)
    padded[: len(data)] = data.to(device)
    gathered = strategy.all_gather(padded).cpu()
    return [pickle.loads(gathered[rank, :size].numpy().tobytes()) for rank, size in enumerate(sizes)]
