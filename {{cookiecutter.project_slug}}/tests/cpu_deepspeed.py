"""Test-only: the project's DeepSpeedStrategy on CPUs (gloo), so CI trains ZeRO 1/2/3 without GPUs.

Lightning refuses DeepSpeed on CPUs ("only supported on CUDA GPUs"); DeepSpeed itself runs
there. Real runs use GPUs, so this lives in tests/ and users cannot pick it by accident.
Tests select it with the overrides in tests/helpers.py's CPU_DEEPSPEED; run_train then also
starts train.py with DS_ACCELERATOR=cpu (DeepSpeed picks its accelerator when first imported,
the GPU wherever CUDA sees one, and train.py's checks may import it before this module).
"""

import importlib

import torch
from deepspeed.accelerator import get_accelerator
from lightning_fabric.utilities.seed import reset_seed
from pytorch_lightning.strategies import DDPStrategy

from {{ cookiecutter.package_name }}.strategies.deepspeed import DeepSpeedStrategy

# DeepSpeed compiles a shared-memory collective for CPUs on first use (about a minute); gloo is enough
# here. (Patched through importlib: `import deepspeed.comm.torch` would bind the torch package.)
importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None

if get_accelerator().device_name() != "cpu":
    raise RuntimeError("DeepSpeed took the GPU for a CPU test run: start train.py with DS_ACCELERATOR=cpu")


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
