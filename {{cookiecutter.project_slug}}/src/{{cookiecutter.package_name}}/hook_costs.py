"""Lightning's host costs per step, cut where the project can.

On a GPU a small model's step is bound by the host's time, and Lightning calls every
callback on every hook of every step (6 per training step), each call wrapped in its
profiler's context manager, also where the callback leaves the hook empty: with this
project's 8 callbacks, about 50 calls and 400 Python function calls per step
(docs/performance.md#lightnings-per-step-cost). run.py applies these:

- NoProfiler: the Trainer's profiler when none is asked for (`trainer.profiler: null`).
- skip_empty_batch_hooks: a callback is not called on per-batch hooks it leaves empty, nor
  on those with nothing to do (a checkpoint saved only at epoch ends).
- store_hook_names_directly: the model's class stores the name of the hook being called
  without nn.Module's checks for parameters, modules and buffers.
- read_step_signatures_once: Lightning's question at every step, whether `training_step`
  takes `batch_idx`, is answered from a signature read once.
- cuda_availability_cached: on CPUs, torch's optimizers ask whether CUDA is available at
  every step without loading NVML's library for each answer.
"""

import contextlib
import inspect
import os
from collections.abc import Iterable

import pytorch_lightning as pl
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.profilers import PassThroughProfiler

BATCH_HOOKS = (
    "on_train_batch_start",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
    "on_train_batch_end",
    "on_validation_batch_start",
    "on_validation_batch_end",
    "on_test_batch_start",
    "on_test_batch_end",
    "on_predict_batch_start",
    "on_predict_batch_end",
)


class NoProfiler(PassThroughProfiler):
    """Lightning's "no profiler" (PassThroughProfiler), without a new generator-based context
    manager for every hook call (about 7 Python calls each): one shared one that does nothing.
    `trainer.profiler=simple` (or advanced, pytorch) still gives Lightning's profilers."""

    _nothing = contextlib.nullcontext()

    def profile(self, action_name: str) -> contextlib.nullcontext:
        return self._nothing


def skip_empty_batch_hooks(callbacks: Iterable[pl.Callback]) -> None:
    """Hide the per-batch hooks each callback inherits empty from pl.Callback, and those that
    have nothing to do (idle_batch_hook).

    Lightning calls a callback's hook only where the attribute is callable (trainer/call.py,
    `_call_callback_hooks`), so an empty hook set to None on the instance is skipped, with
    its profiler context and lookups; the hooks a callback implements are called as before.
    """
    for callback in callbacks:
        for hook in BATCH_HOOKS:
            inherited = getattr(type(callback), hook) is getattr(pl.Callback, hook)
            if (inherited or idle_batch_hook(callback, hook)) and hook not in vars(callback):
                setattr(callback, hook, None)


def idle_batch_hook(callback: pl.Callback, hook: str) -> bool:
    """A ModelCheckpoint saves at a batch's end only every N training steps or every so much wall
    time; set to save at epoch ends (last.ckpt, the best val/loss) its on_train_batch_end returns
    at once, after a few lookups, on every step."""
    return (
        hook == "on_train_batch_end"
        and isinstance(callback, ModelCheckpoint)
        and getattr(callback, "_every_n_train_steps", 1) < 1  # Lightning's names; unknown ones keep the hook
        and getattr(callback, "_train_time_interval", 0) is None
    )


def store_hook_names_directly(model: pl.LightningModule) -> None:
    """Lightning records which hook runs (for `self.log`) by setting `model._current_fx_name`
    before and after each hook call: 44 times per training step. Each goes through
    nn.Module.__setattr__, which checks the value for a parameter, a module or a buffer: about
    2 µs of Python each, 80 µs per step on the development CPU (docs/performance.md). A hook's
    name is a string or None, so the model's class now stores it as a plain attribute; every
    other attribute goes through the class's own __setattr__ as before. Changed on the class,
    not the instance (Python looks __setattr__ up on the class), so it stays picklable."""
    cls = type(model)
    if getattr(cls.__setattr__, "stores_hook_names_directly", False):
        return
    inherited = cls.__setattr__

    def __setattr__(self, name, value):
        if name == "_current_fx_name" and (value is None or isinstance(value, str)):
            object.__setattr__(self, name, value)
        else:
            inherited(self, name, value)

    __setattr__.stores_hook_names_directly = True
    cls.__setattr__ = __setattr__


STEP_METHODS = ("training_step", "validation_step", "test_step", "predict_step")


def read_step_signatures_once(model: pl.LightningModule) -> None:
    """Lightning asks at every step whether the step method takes `batch_idx`, with
    inspect.getfullargspec, which reads the signature from the code each time (12.9 µs of
    Python on the development CPU; 3.7 µs with the signature set). inspect takes a function's
    `__signature__` where it has one: set once, from inspect itself, on the model's step
    methods, it gives the same answer."""
    for name in STEP_METHODS:
        function = getattr(type(model), name, None)
        function = getattr(function, "__wrapped__", function)  # Lightning looks through a decorator
        if inspect.isfunction(function) and "__signature__" not in vars(function):
            function.__signature__ = inspect.signature(function, follow_wrapped=False)


NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


@contextlib.contextmanager
def cuda_availability_cached(on_gpu: bool):
    """On CPUs: while it lasts, torch answers `torch.cuda.is_available()` from its own cached
    count of devices, not through NVML.

    torch's Adam and AdamW ask it at every optimizer step. Importing Lightning sets
    PYTORCH_NVML_BASED_CUDA_CHECK=1, so that a process can fork before CUDA starts in it; until
    CUDA starts, each answer then loads NVML's library anew (and on a GPU machine initialises
    NVML): about 100 µs a step on the development CPU against 0.7 µs, with the caches it
    disturbs besides. A run on CPUs uses no CUDA (where GPUs are, Lightning starts it only to save
    its random state), so it paid that at every step, and it forks no process that uses CUDA.
    On a GPU nothing changes: CUDA starts, and torch caches
    the answer. The variable is restored afterwards (its children get Lightning's setting
    again when they import it)."""
    before = os.environ.get(NVML_CHECK)
    if not on_gpu:
        os.environ[NVML_CHECK] = "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(NVML_CHECK, None)
        else:
            os.environ[NVML_CHECK] = before
