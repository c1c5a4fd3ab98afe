"""The same model on the same data, trained by a loop written by hand, the way the HPC
centres' DDP tutorials write it: DistributedSampler, DistributedDataParallel, AdamW, tuned
as a careful user tunes it on a GPU: fused AdamW, TF32 matmuls, cudnn benchmark mode, data
held on the device, and with --compile the model compiled with torch.compile. The way
"plain-step" compiles the whole step instead (forward, loss, backward, optimizer step: one
function, as a tuned hand loop compiles it), which Lightning's path cannot do: what compiling
more than the model would buy, on the same data.

Only the training loop differs from the project: the data tensors, the network, the
optimizer's settings (`configure_optimizers`) and the DDP settings come from the same config.
"""

import contextlib
import time

import torch
import torch.distributed as dist
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DistributedSampler

from ..data.in_memory import normalize
from ..data.loaders import make_loader
from ..data.resumable import EpochShuffle
from ..hook_costs import cuda_availability_cached
from ..launch.errors import SetupError
from ..models.autoencoder import AutoEncoder
from .measure import Measurement, StepWindow, synchronize

# torch.autocast dtypes of Lightning's mixed precisions; "32-true" and "32" need none.
AUTOCAST = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}
FULL_PRECISION = {"32-true", "32", 32}
# Lightning's "-true" precisions: the model and its inputs in that dtype, no autocast.
TRUE_DTYPES = {"bf16-true": torch.bfloat16, "16-true": torch.float16, "64-true": torch.float64}


def check_precision(precision):
    """A precision the plain loop can train as Lightning does (else SetupError: one line)."""
    if precision not in FULL_PRECISION and precision not in AUTOCAST and precision not in TRUE_DTYPES:
        allowed = ", ".join(["32-true", *AUTOCAST, *TRUE_DTYPES])
        raise SetupError(
            f"trainer.precision={precision}: the benchmark's plain loop trains {allowed}. "
            "Fix: e.g. trainer.precision=bf16-mixed"
        )
    return precision


def train_loader(cfg: DictConfig, device: torch.device):
    """The project's training set, in a DataLoader with a DistributedSampler and the same workers."""
    datamodule = instantiate(cfg.data)
    datamodule.setup("fit")
    train_set = datamodule.placed(datamodule.train_set, device)
    shuffle = DistributedSampler if dist.is_initialized() else EpochShuffle  # each epoch's order from the seed
    sampler = shuffle(train_set, seed=cfg.seed)
    workers = datamodule.workers_for(train_set)
    loader = make_loader(train_set, cfg.data.batch_size, True, num_workers=workers, sampler=sampler)
    return loader, datamodule


def _ddp_options(cfg: DictConfig) -> dict:
    instance = cfg.strategy.instance
    if isinstance(instance, str):
        return {}
    keys = ("find_unused_parameters", "gradient_as_bucket_view", "static_graph")
    return {key: instance[key] for key in keys if key in instance}


def _loss(module, output: torch.Tensor, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    if isinstance(module, AutoEncoder):
        return F.mse_loss(output, images)
    return F.cross_entropy(output, labels)


def fused_on_cuda(optimizer: torch.optim.Optimizer, device: torch.device) -> torch.optim.Optimizer:
    """torch's Adam/AdamW as one fused kernel on CUDA, with the same settings (fused=True)."""
    if device.type != "cuda" or type(optimizer) not in (torch.optim.Adam, torch.optim.AdamW):
        return optimizer
    if optimizer.defaults.get("fused"):
        return optimizer
    own = ("fused", "foreach")  # chosen anew; every other setting of each group stays
    groups = [{key: value for key, value in group.items() if key not in own} for group in optimizer.param_groups]
    return type(optimizer)(groups, fused=True)


@contextlib.contextmanager
def tuned_backends(device: torch.device, speed: DictConfig):
    """The config's speed.matmul_precision and speed.cudnn_benchmark on a GPU (by default TF32 matmuls
    and cudnn's benchmark mode), for this loop only, as the Lightning path sets them (speed.py):
    neither way takes its settings from whichever ran before it."""
    if device.type != "cuda":
        yield
        return
    precision, benchmark = torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark
    torch.set_float32_matmul_precision(speed.matmul_precision)
    torch.backends.cudnn.benchmark = bool(speed.cudnn_benchmark)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(precision)
        torch.backends.cudnn.benchmark = benchmark


def train_plain(
    cfg: DictConfig, window: StepWindow, device: torch.device, compile_mode: str | None = None, whole_step=False
):
    """whole_step: compile_mode applies to the whole step, not to the model's call alone."""
    # Without Lightning imported, a plain loop on CPUs never pays NVML's check per step (hook_costs.py).
    with tuned_backends(device, cfg.speed), cuda_availability_cached(on_gpu=device.type == "cuda"):
        return _train_plain(cfg, window, device, compile_mode, whole_step)


def _train_plain(
    cfg: DictConfig, window: StepWindow, device: torch.device, compile_mode: str | None, whole_step: bool
) -> Measurement:
    precision = check_precision(cfg.trainer.precision)
    true_dtype = TRUE_DTYPES.get(precision)
    torch.manual_seed(cfg.seed)
    loader, datamodule = train_loader(cfg, device)
    module = instantiate(cfg.model).to(device, dtype=true_dtype)
    optimizer = fused_on_cuda(module.configure_optimizers(), device)
    if compile_mode and not whole_step:
        module.compile(mode=compile_mode)  # in place: its calls, also through DDP, run compiled
    model = module
    if dist.is_initialized():
        device_ids = [device.index] if device.type == "cuda" else None
        model = DistributedDataParallel(module, device_ids=device_ids, **_ddp_options(cfg))
    dtype = AUTOCAST.get(precision)
    autocast = torch.autocast(device.type, dtype=dtype) if dtype else contextlib.nullcontext()
    scaler = torch.amp.GradScaler(device.type, enabled=dtype is torch.float16)
    log_every = cfg.trainer.log_every_n_steps

    def step(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with autocast:
            loss = _loss(module, model(images), images, labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss

    if whole_step:
        step = torch.compile(step, mode=compile_mode)

    model.train()
    window.begin()
    epoch = 0
    sampler = loader.batch_sampler.sampler  # in a BatchSampler (or IndexBatches) for every loader of make_loader
    while window.done < window.total_steps:
        sampler.set_epoch(epoch)  # a DistributedSampler, or one process's EpochShuffle (data/resumable.py)
        for images, labels in loader:
            images = normalize(images.to(device, non_blocking=True), datamodule.mean, datamodule.std)
            images = images if true_dtype is None else images.to(true_dtype)
            labels = labels.to(device, non_blocking=True)
            if whole_step:  # a new step for CUDA graphs: the last step's outputs may be overwritten
                torch.compiler.cudagraph_mark_step_begin()
            loss = step(images, labels)
            if window.done % log_every == 0:
                loss.item()  # what the tutorials print every few steps: one device sync
            window.step_done()
            if window.done == window.total_steps:
                break
        epoch += 1
    return window.result()


def loader_only(cfg: DictConfig, steps: int, device: torch.device) -> tuple[float, int, int]:
    """Samples/s per rank of the data pipeline alone (batches, to the device, normalised),
    the size of the training set, and the loader's workers per rank."""
    loader, datamodule = train_loader(cfg, device)
    done = 0
    synchronize(device)
    start = time.perf_counter()
    while done < steps:
        for images, labels in loader:
            images = normalize(images.to(device, non_blocking=True), datamodule.mean, datamodule.std)
            labels = labels.to(device, non_blocking=True)
            done += 1
            if done == steps:
                break
    synchronize(device)
    return steps * cfg.data.batch_size / (time.perf_counter() - start), len(loader.dataset), loader.num_workers
