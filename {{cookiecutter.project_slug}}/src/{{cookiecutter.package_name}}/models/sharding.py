"""FSDP2 (strategy=fsdp2): the models shard themselves with torch's `fully_shard`.

Lightning's ModelParallelStrategy builds the device mesh and calls `configure_model`;
with any other strategy `device_mesh` is None and nothing happens.
"""

import pytorch_lightning as pl
from torch import nn


def shard_layers(module: pl.LightningModule, net: nn.Module) -> None:
    """Shard every layer of `net` that has parameters, then `net` itself (the usual FSDP2 recipe:
    each layer's parameters are gathered just before it runs and freed right after)."""
    if module.device_mesh is None:
        return
    try:
        from torch.distributed.fsdp import FSDPModule, fully_shard
    except ImportError:  # torch < 2.6
        from torch.distributed._composable.fsdp import FSDPModule, fully_shard

    if isinstance(net, FSDPModule):  # configure_model runs again on a second fit()
        return
    mesh = module.device_mesh["data_parallel"]
    for layer in net.children():
        if any(True for _ in layer.parameters()):
            fully_shard(layer, mesh=mesh)
    fully_shard(net, mesh=mesh)
