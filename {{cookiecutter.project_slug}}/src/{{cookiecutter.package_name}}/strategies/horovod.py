"""Horovod for Lightning 2.x, which dropped its own HorovodStrategy in 2.0.

Horovod starts the processes and owns the ranks; trainer.devices and num_nodes are ignored:

    horovodrun -np 4 python train.py strategy=horovod            # one machine
    srun --mpi=pmix python train.py strategy=horovod             # Slurm, Horovod built with MPI

Gradients are averaged by hvd.DistributedOptimizer (ring all-reduce over NCCL, MPI or gloo),
so the global batch is data.batch_size x processes, as with DDP.
"""

import os
from collections.abc import Callable
from typing import Any

import horovod.torch as hvd
import pytorch_lightning as pl
import torch
import torchmetrics
from lightning_fabric.plugins.environments import ClusterEnvironment
from lightning_fabric.utilities.seed import reset_seed
from lightning_utilities.core.rank_zero import rank_zero_only as utils_rank_zero_only
from pytorch_lightning.strategies import ParallelStrategy
from pytorch_lightning.trainer.states import TrainerFn
from pytorch_lightning.utilities.rank_zero import rank_zero_only

from ..launch.errors import SetupError

_REDUCE_OPS = {"mean": hvd.Average, "avg": hvd.Average, "sum": hvd.Sum, "max": hvd.Max, "min": hvd.Min}


class HorovodEnvironment(ClusterEnvironment):
    """Ranks as Horovod's launcher assigned them. Given to Lightning explicitly, it also keeps
    Lightning from reading Slurm's variables in a Slurm job (srun --mpi, horovodrun)."""

    @property
    def creates_processes_externally(self) -> bool:
        return True

    @property
    def main_address(self) -> str:
        return os.environ.get("HOROVOD_GLOO_RENDEZVOUS_ADDR", "127.0.0.1")

    @property
    def main_port(self) -> int:
        return int(os.environ.get("HOROVOD_GLOO_RENDEZVOUS_PORT", 0))

    @staticmethod
    def detect() -> bool:
        return "HOROVOD_RANK" in os.environ

    def world_size(self) -> int:
        return hvd.size()

    def set_world_size(self, size: int) -> None:
        pass  # Horovod decides

    def global_rank(self) -> int:
        return hvd.rank()

    def set_global_rank(self, rank: int) -> None:
        pass  # Horovod decides

    def local_rank(self) -> int:
        return hvd.local_rank()

    def node_rank(self) -> int:
        return hvd.cross_rank()


class HorovodStrategy(ParallelStrategy):
    strategy_name = "horovod"

    def __init__(self, **kwargs: Any):
        hvd.init()
        super().__init__(cluster_environment=HorovodEnvironment(), **kwargs)

    @property
    def is_distributed(self) -> bool:
        return True  # Lightning then inserts a DistributedSampler into every loader

    @property
    def distributed_sampler_kwargs(self) -> dict[str, int]:
        return {"num_replicas": hvd.size(), "rank": hvd.rank()}

    @property
    def root_device(self) -> torch.device:
        if self.parallel_devices and self.parallel_devices[0].type == "cuda":
            # Modulo: under Slurm's --gpus-per-task each process sees only its own GPU.
            return torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
        return torch.device("cpu")

    def set_world_ranks(self) -> None:
        # The Trainer calls this as it is built (as for DDP): from then on, logs and files come from
        # rank 0 only. Lightning's own guess (RANK, SLURM_PROCID) says 0 in every rank under horovodrun.
        rank_zero_only.rank = utils_rank_zero_only.rank = self.global_rank

    def setup_environment(self) -> None:
        check_gpu_support(self.root_device)
        reset_seed()  # as Lightning's DDP does here: the same random stream (dropout) as a DDP run
        super().setup_environment()

    def model_to_device(self) -> None:
        assert self.model is not None
        self.model.to(self.root_device)

    def setup(self, trainer: "pl.Trainer") -> None:
        super().setup(trainer)  # moves the model, creates the optimizers
        for metric in self.lightning_module.modules():
            if isinstance(metric, torchmetrics.Metric):  # metrics compute over all ranks' samples
                metric.dist_sync_fn = _gather_all_tensors
                metric.distributed_available_fn = _always
        if trainer.state.fn != TrainerFn.FITTING:
            return
        # Gradients are averaged every `accumulate_grad_batches` backward passes, not every one.
        originals = self.optimizers
        self.optimizers = [
            hvd.DistributedOptimizer(
                optimizer,
                named_parameters=self._named_parameters_of(optimizer),
                backward_passes_per_step=trainer.accumulate_grad_batches,
            )
            for optimizer in originals
        ]
        for config in self.lr_scheduler_configs:  # schedulers must drive the wrapped optimizers
            config.scheduler.optimizer = self.optimizers[originals.index(config.scheduler.optimizer)]

    def _named_parameters_of(self, optimizer: torch.optim.Optimizer) -> list[tuple[str, torch.nn.Parameter]]:
        in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}
        return [(name, p) for name, p in self.lightning_module.named_parameters() if id(p) in in_optimizer]

    def on_train_start(self) -> None:
        # Runs after a checkpoint was restored: every rank continues from rank 0's state.
        hvd.broadcast_parameters(self.lightning_module.state_dict(), root_rank=0)
        for optimizer in self.optimizers:
            if optimizer.state_dict()["state"]:  # a fresh optimizer has no state to share
                hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        self._broadcast_buffers()

    def on_validation_start(self) -> None:
        self._broadcast_buffers()

    def _broadcast_buffers(self) -> None:
        # Like DDP: BatchNorm statistics follow rank 0, so all ranks hold the same model.
        buffers = list(self.lightning_module.named_buffers())
        if buffers:
            hvd.broadcast_parameters(buffers, root_rank=0)

    def optimizer_step(self, optimizer, closure: Callable[[], Any], model=None, **kwargs: Any) -> Any:
        # Lightning runs forward and backward inside optimizer.step(closure). Horovod would average the
        # gradients before that closure ran, so average them at its end instead (before clipping).
        def closure_then_average() -> Any:
            result = closure()
            optimizer.synchronize()
            return result

        with optimizer.skip_synchronize():
            return super().optimizer_step(optimizer, closure_then_average, model, **kwargs)

    def reduce(self, tensor: Any, group: Any | None = None, reduce_op: Any = "mean") -> Any:
        if not isinstance(tensor, torch.Tensor):
            return tensor
        # Like Lightning's DDP: "mean"/"sum"/... or torch's ReduceOp; None sums.
        name = "sum" if reduce_op is None else reduce_op if isinstance(reduce_op, str) else reduce_op.name
        return hvd.allreduce(tensor, op=_REDUCE_OPS[name.lower()])

    def all_gather(self, tensor: torch.Tensor, group: Any | None = None, sync_grads: bool = False) -> torch.Tensor:
        return hvd.allgather(tensor.unsqueeze(0))  # shape (world_size, *tensor.shape), as in Lightning

    def broadcast(self, obj: Any, src: int = 0) -> Any:
        return hvd.broadcast_object(obj, root_rank=src)

    def barrier(self, name: str | None = None) -> None:
        hvd.barrier()

    def teardown(self) -> None:
        super().teardown()
        hvd.barrier()  # nobody leaves while another rank still writes a checkpoint


def check_gpu_support(device: torch.device) -> None:
    if device.type == "cuda" and not hvd.cuda_built():
        raise SetupError(
            "strategy=horovod on GPUs, but this Horovod was built without CUDA.\n"
            "Fix: HOROVOD_REBUILD=1 bash scripts/install-horovod.sh   (with the CUDA toolkit and NCCL loaded)"
        )


def _always() -> bool:
    return True


def _gather_all_tensors(tensor: torch.Tensor, group: Any | None = None) -> list[torch.Tensor]:
    """torchmetrics' gather over Horovod: one tensor per rank (ranks may hold different lengths)."""
    scalar = tensor.dim() == 0
    rows = tensor.reshape(1) if scalar else tensor
    lengths = hvd.allgather(torch.tensor([rows.shape[0]])).tolist()
    parts = hvd.allgather(rows).split(lengths)
    return [part.reshape(()) for part in parts] if scalar else list(parts)
