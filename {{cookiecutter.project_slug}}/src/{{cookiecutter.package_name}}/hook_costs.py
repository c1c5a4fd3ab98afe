"""Lightning's cost per hook call, cut where the project can.

On a GPU a small model's step is bound by the host's time, and Lightning calls every
callback on every hook of every step (6 per training step), each call wrapped in its
profiler's context manager, also where the callback leaves the hook empty: with this
project's 8 callbacks, about 50 calls and 400 Python function calls per step
(docs/performance.md#lightnings-per-step-cost). run.py applies both of these:

- NoProfiler: the Trainer's profiler when none is asked for (`trainer.profiler: null`).
- skip_empty_batch_hooks: a callback is not called on per-batch hooks it leaves empty.
"""

import contextlib
from collections.abc import Iterable

import pytorch_lightning as pl
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
    """Hide the per-batch hooks each callback inherits empty from pl.Callback.

    Lightning calls a callback's hook only where the attribute is callable (trainer/call.py,
    `_call_callback_hooks`), so an empty hook set to None on the instance is skipped, with
    its profiler context and lookups; the hooks a callback implements are called as before.
    """
    for callback in callbacks:
        for hook in BATCH_HOOKS:
            if getattr(type(callback), hook) is getattr(pl.Callback, hook) and hook not in vars(callback):
                setattr(callback, hook, None)
