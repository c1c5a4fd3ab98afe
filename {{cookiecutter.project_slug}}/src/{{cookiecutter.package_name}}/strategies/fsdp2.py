"""FSDP2: Lightning's ModelParallelStrategy used for data parallelism only, sharding the model itself.

Its "auto" sizes mean tensor parallelism within a node and data parallelism across nodes.
Here every process shards the model, so the data-parallel size is the world size, known
only once the processes exist. Lightning leaves the sharding to the model's
`configure_model`; this strategy does it, so that an ordinary LightningModule trains
unchanged: each layer is sharded on its own (its parameters are gathered just before it
runs and freed right after), then each top-level submodule (the usual FSDP2 recipe). A model
that calls `fully_shard` itself in `configure_model` is left as it sharded itself.
"""

from collections.abc import Sequence

import pytorch_lightning as pl
from pytorch_lightning.strategies import ModelParallelStrategy
from pytorch_lightning.utilities.model_helpers import is_overridden
from torch import nn

try:
    from torch.distributed.fsdp import FSDPModule, fully_shard
except ImportError:  # torch < 2.6
    from torch.distributed._composable.fsdp import FSDPModule, fully_shard

from ..launch.errors import SetupError
from .whole_saves import WholeSaves


class FSDP2Strategy(WholeSaves, ModelParallelStrategy):  # a checkpoint whole or not at all
    def __init__(self, layers: Sequence[str] | None = None, **kwargs):
        """layers: class names of the modules to shard one by one (e.g. ["TransformerBlock"]);
        None: every module that holds parameters itself (Linear, Conv2d, ...)."""
        super().__init__(data_parallel_size="auto", tensor_parallel_size=1, **kwargs)
        self.layers = tuple(layers) if layers is not None else None

    def setup_environment(self) -> None:
        self._data_parallel_size = self.num_nodes * self.num_processes  # before the device mesh is built
        super().setup_environment()

    def setup(self, trainer: "pl.Trainer") -> None:
        module = self.lightning_module
        if not any(isinstance(m, FSDPModule) for m in module.modules()):  # not sharded by its configure_model
            shard(module, self.device_mesh["data_parallel"], self.layers)
        if is_overridden("configure_model", module):
            return super().setup(trainer)
        # Lightning's setup insists that configure_model did the sharding; here the strategy did.
        module.configure_model = _sharded_by_the_strategy
        try:
            super().setup(trainer)
        finally:
            del module.configure_model


def shard(module: pl.LightningModule, mesh, layers: tuple[str, ...] | None) -> None:
    """fully_shard the layers below each top-level submodule, innermost first, then those submodules."""
    if any(True for _ in module.parameters(recurse=False)):
        names = [name for name, _ in module.named_parameters(recurse=False)]
        raise SetupError(
            f"strategy=fsdp2 shards the model's submodules, but {type(module).__name__} holds parameters "
            f"itself ({', '.join(names)}). Fix: move them into a submodule (e.g. an nn.Module attribute)"
        )
    layered = _layer_classes(module)
    if layers is not None and (missing := [name for name in layers if name not in layered]):
        raise SetupError(
            f"strategy.instance.layers=[{','.join(layers)}]: {type(module).__name__} has no layer of class "
            f"{', '.join(missing)} (its layers: {', '.join(sorted(layered))}). Fix: class names from those, "
            "or strategy.instance.layers=null (every module with parameters)"
        )
    for child in module.children():
        if not any(True for _ in child.parameters()):
            continue  # metrics, activations
        for layer in reversed(list(child.modules())[1:]):  # children before their parents
            if _is_layer(layer, layers):
                fully_shard(layer, mesh=mesh)
        fully_shard(child, mesh=mesh)


def _layer_classes(module: pl.LightningModule) -> set[str]:
    """The classes of the modules that shard() may shard one by one: those below each submodule with parameters."""
    children = [child for child in module.children() if any(True for _ in child.parameters())]
    return {type(layer).__name__ for child in children for layer in list(child.modules())[1:]}


def _is_layer(module: nn.Module, layers: tuple[str, ...] | None) -> bool:
    if layers is None:
        return any(True for _ in module.parameters(recurse=False))
    return type(module).__name__ in layers


def _sharded_by_the_strategy() -> None:
    pass
