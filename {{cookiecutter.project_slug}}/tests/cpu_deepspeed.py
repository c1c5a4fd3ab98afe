"""Test-only: the project's DeepSpeedStrategy on CPUs (gloo), so CI trains ZeRO 1/2/3 without GPUs.

Lightning refuses DeepSpeed on CPUs ("only supported on CUDA GPUs"); DeepSpeed itself runs
there. Real runs use GPUs, so this lives in tests/ and users cannot pick it by accident.
Tests select it with the overrides in tests/helpers.py's CPU_DEEPSPEED; only the train.py
processes they start import this module.
"""

import importlib
import os

# DeepSpeed picks its accelerator once per process, and the GPU wherever CUDA sees one: these
# runs are meant for the CPU on a GPU machine too. Set before deepspeed is first imported
# (just below); the ranks Lightning starts inherit it.
os.environ["DS_ACCELERATOR"] = "cpu"

import torch
from lightning_fabric.utilities.seed import reset_seed
from pytorch_lightning.strategies import DDPStrategy

from {{ cookiecutter.package_name }}.strategies.deepspeed import DeepSpeedStrategy

# DeepSpeed compiles a shared-memory collective for CPUs on first use (about a minute); gloo is enough
# here. (Patched through importlib: `import deepspeed.comm.torch` would bind the torch package.)
importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None


class CPUDeepSpeedStrategy(DeepSpeedStrategy):
    def setup_environment(self) -> None:
        DDPStrategy.setup_environment(self)  # DeepSpeedStrategy's own version refuses CPUs

    @property
    def root_device(self) -> torch.device:
        return torch.device("cpu", 0)  # DeepSpeed needs a device index

    def setup_distributed(self) -> None:
        # DeepSpeedStrategy's version, without its check that device indices are GPUs.
        reset_seed()
        self.set_world_ranks()
        self._init_deepspeed_distributed()
