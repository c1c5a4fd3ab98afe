"""Whether the checkpoint a run starts from (a resume, ckpt_path=...) can be resumed by this
config, checked before fit: its format against the strategy, its weights against the model, its
optimizer state against the optimizer, its training time and epochs against +trainer.max_time and
trainer.max_epochs (max_steps); and which optimizer settings the config changes, which Lightning
alone would restore from the checkpoint (callbacks/optimizer_settings.py)."""

from datetime import timedelta
from functools import cached_property
from pathlib import Path

from omegaconf import DictConfig

from .errors import SetupError
from .run_directory import _key

# Sharded checkpoints (folders) by who writes them, and the strategies that read them back.
FOLDER_READERS = {
    "DeepSpeed": ("deepspeed", "strategy=deepspeed_stage_<N> as it was trained"),
    "torch.distributed.checkpoint": ("fsdp", "strategy=fsdp2 (or fsdp) as it was trained"),
}


class StartCheckpoint:
    """The checkpoint a run starts from (path None: a new run), as the checks read it: its saved
    state is loaded once (each check loaded it again before: six loads a start), its tensors mapped,
    not read. The map keeps the file open: drop this before training (a rotated checkpoint's space
    would stay taken)."""

    def __init__(self, path: str | None):
        self.path = path

    @cached_property
    def state(self) -> dict:
        return _saved_state(self.path)


def check_checkpoint_format(ckpt_path: str | None, strategy: DictConfig) -> None:
    """A sharded checkpoint (a folder of shards) resumes only under the kind of strategy that wrote
    it, and DeepSpeed resumes only from its folders: another ended in a traceback once fit had
    started (under DDP IsADirectoryError, under DeepSpeed "not a valid DeepSpeed checkpoint")."""
    name = str(strategy.name)
    if ckpt_path and Path(ckpt_path).is_file() and name.startswith("deepspeed"):
        instance = strategy.get("instance")
        if not (isinstance(instance, DictConfig) and instance.get("load_full_weights") and instance.get("stage") == 3):
            raise SetupError(
                f"ckpt_path={ckpt_path}: one file, and strategy={name} resumes only from DeepSpeed's checkpoint "
                "folders. Fix: resume with the strategy that wrote it (e.g. strategy=ddp), or start a new run"
            )
    if not ckpt_path or not Path(ckpt_path).is_dir():
        return
    folder = Path(ckpt_path)
    if (folder / "latest").is_file() or (folder / "checkpoint").is_dir():
        kind = "DeepSpeed"
    elif (folder / ".metadata").is_file():
        kind = "torch.distributed.checkpoint"
    else:
        raise SetupError(
            f"ckpt_path={ckpt_path}: a folder, but neither a DeepSpeed nor a sharded (torch.distributed.checkpoint) "
            "checkpoint. Fix: the path of a .ckpt file or folder from a run's checkpoints/"
        )
    prefix, fix = FOLDER_READERS[kind]
    if not name.startswith(prefix):
        if kind == "DeepSpeed":  # its weights as one file, for a new run's model
            package = __package__.rpartition(".")[0]
            fix += f"; or make it one file: python -m {package}.convert_zero_checkpoint {ckpt_path}"
        raise SetupError(
            f"ckpt_path={ckpt_path}: a {kind} checkpoint (a folder of shards), which strategy={name} cannot "
            f"resume from. Fix: resume with {fix}"
        )


def check_checkpoint_fits(model, start: StartCheckpoint, optimizer_keys: list[str]) -> dict[int, dict]:
    """The checkpoint a run starts from must fit the model and optimizer the config builds. A
    resume with another model (model=..., a model.net.* size) or optimizer class stopped inside
    Lightning's restore with a traceback (and the next resume took the refused start's overrides).

    Returns the optimizer settings among `optimizer_keys` (model.optimizer's) whose configured value
    differs from the checkpoint's, by optimizer, as {setting: (saved, configured)}: Lightning restores
    the saved ones, so a resume with model.optimizer.lr=... ran on the old lr, silently
    (callbacks/optimizer_settings.py)."""
    ckpt_path = start.path
    if not ckpt_path:
        return {}  # a new run
    if Path(ckpt_path).is_dir():  # sharded: the weights' shapes only; its strategy restores the rest
        _check_shapes(model, _sharded_shapes(start), ckpt_path, complete=False)
        return {}
    weights = start.state.get("state_dict")  # shapes only: the tensors are mapped, not read
    if not isinstance(weights, dict):  # not loadable this way: Lightning's own load says why
        return {}
    _check_shapes(model, {key: value.shape for key, value in weights.items()}, ckpt_path, complete=model.strict_loading)
    return _optimizer_changes(model, start.state.get("optimizer_states") or [], optimizer_keys, ckpt_path)


def _check_shapes(model, saved: dict, ckpt_path: str, complete: bool) -> None:
    """SetupError where a saved weight's shape is not the model's; complete: every weight on both
    sides (a file's state_dict under strict loading; a sharded checkpoint's names differ by format)."""
    here = {key: value.shape for key, value in model.state_dict().items()}
    differ = [
        f"{key}: {list(saved[key])} there, {list(shape)} here"
        for key, shape in here.items()
        if key in saved and saved[key] != shape
    ]
    if complete:
        differ += [f"{key}: not there" for key in here if key not in saved]
        differ += [f"{key}: not here" for key in saved if key not in here]
    if differ:
        raise SetupError(
            f"ckpt_path={ckpt_path}: its weights do not fit the model this config builds ({len(differ)} differ; "
            f"{'; '.join(differ[:2])}){_model_settings()}. Fix: resume with the model settings the run trained with "
            "(leave out those that change it), or start a new run without resume= / ckpt_path"
        )


def _sharded_shapes(start: StartCheckpoint) -> dict:
    """{weight: shape} of a sharded checkpoint, from what describes its shards (no tensor read):
    DeepSpeed's model states of rank 0 (under ZeRO-3 the parameters' shapes are listed apart,
    the buffers kept whole), or torch.distributed.checkpoint's metadata (FSDP2, FSDP). {} where
    unreadable: the strategy's own load then says why."""
    folder = Path(start.path)
    try:
        if (folder / ".metadata").is_file():
            from torch.distributed.checkpoint import FileSystemReader

            stored = FileSystemReader(str(folder)).read_metadata().state_dict_metadata
            prefix = "state_dict."  # Lightning's key for the model's weights
            return {key[len(prefix) :]: item.size for key, item in stored.items() if key.startswith(prefix)}
        state = start.state
        shapes = {key: value.shape for key, value in (state.get("module") or {}).items() if value.numel()}
        for group in state.get("param_shapes") or []:  # ZeRO-3: each rank's module holds empty parameters
            shapes.update(group)
        return shapes
    except Exception:
        return {}


def check_time_left(trainer, start: StartCheckpoint) -> None:
    """`+trainer.max_time` limits the whole run: Lightning's Timer keeps its count in the checkpoint.
    A resume of a run that used it up ended at once with exit 0, having done nothing."""
    timer = _timer(trainer)
    if timer is None:
        return
    try:
        elapsed = float(start.state["callbacks"]["Timer"]["time_elapsed"]["train"])
    except (KeyError, TypeError, ValueError):  # written without a time limit, or not loadable this way
        return
    limit = timer._duration  # Lightning's name: seconds (None: no limit)
    if limit is not None and elapsed >= limit:
        raise SetupError(
            f"trainer.max_time: the run has trained {timedelta(seconds=round(elapsed))} of its "
            f"{timedelta(seconds=round(limit))} already ({start.path}): a limit for the whole run, which a resume "
            "keeps. "
            "Fix: a larger +trainer.max_time=DD:HH:MM:SS (a job's own time limit needs none: the job saves and "
            "requeues itself before it, README)"
        )


def stopped_by_time_limit(trainer) -> bool:
    """`+trainer.max_time` ended the training before its epochs or steps (Lightning said only "Time
    limit reached", and the run exited 0). Rank 0's Timer decided the stop, and decides this for
    every rank: another rank's may have a moment left. Where neither max_epochs nor max_steps
    limits the run, the time limit is its planned end."""
    timer = _timer(trainer)
    if timer is None or timer.time_remaining() is None or not has_epoch_or_step_limit(trainer):
        return False  # no time limit (a Timer of one's own may have none)
    time_up = trainer.strategy.broadcast(timer.time_remaining() <= 0, src=0)
    return time_up and limit_reached(trainer, epochs_done(trainer), trainer.global_step) is None


def stopped_early(trainer) -> bool:
    """At the training's end: a callback (EarlyStopping, one's own) ended it before its max_epochs or
    max_steps, not +trainer.max_time with epochs or steps left (that run trains on, exit 124). The
    same on every rank: should_stop is agreed."""
    return (
        trainer.should_stop
        and limit_reached(trainer, epochs_done(trainer), trainer.global_step) is None
        and not stopped_by_time_limit(trainer)
    )


def epochs_done(trainer) -> int:
    """The training's whole epochs. Lightning counts an epoch that a limit (max_time, max_steps) ended
    in its middle as processed (and current_epoch as the next)."""
    epochs = trainer.fit_loop.epoch_progress.current
    batches = trainer.fit_loop.epoch_loop.batch_progress.current.completed
    ended = 0 < epochs.processed == epochs.ready  # no epoch under way (in one: ready is one more)
    return epochs.processed - (ended and batches < trainer.num_training_batches)


def has_epoch_or_step_limit(trainer) -> bool:
    return trainer.max_epochs not in (None, -1) or trainer.max_steps not in (None, -1)


def _timer(trainer):
    """Lightning's Timer, which +trainer.max_time adds (None without one)."""
    from pytorch_lightning.callbacks import Timer

    return next((callback for callback in trainer.callbacks if isinstance(callback, Timer)), None)


def check_epochs_left(trainer, start: StartCheckpoint) -> None:
    """A resume whose trainer.max_epochs (or trainer.max_steps) the run has reached already: with
    fewer epochs than trained, Lightning stopped with a traceback ("You restored a checkpoint
    with current_epoch=4, but you have set Trainer(max_epochs=1)"); with as many, it trained
    nothing and exited 0."""
    problem = _limit_reached(trainer, start)
    if problem:
        raise SetupError(problem)


def training_ended(trainer, start: StartCheckpoint) -> bool:
    """The checkpoint has reached trainer.max_epochs or trainer.max_steps, or a callback ended its
    training early (EarlyStopping): nothing left to train."""
    return _limit_reached(trainer, start) is not None or ended_early(start)


def ended_early(start: StartCheckpoint) -> bool:
    """The checkpoint was saved where a callback ended the training early (stopped_early, then)."""
    from ..callbacks.checkpoints import STOPPED_EARLY

    return start.state.get(STOPPED_EARLY) is True


def _limit_reached(trainer, start: StartCheckpoint) -> str | None:
    state = start.state
    try:
        epochs = int(state["loops"]["fit_loop"]["epoch_progress"]["current"]["processed"])  # mid-epoch: the done ones
        steps = int(state["global_step"])
    except (KeyError, TypeError, ValueError):
        return None
    trained = f"the run has trained {epochs} epoch(s), {steps} step(s) already ({start.path})"
    limit = limit_reached(trainer, epochs, steps)
    if limit == "max_epochs":
        return (
            f"trainer.max_epochs={trainer.max_epochs}: {trained}, and a resume trains up to max_epochs in all. "
            f"Fix: trainer.max_epochs={epochs + 1} or more"
        )
    if limit == "max_steps":
        return (
            f"trainer.max_steps={trainer.max_steps}: {trained}, and a resume trains up to max_steps in all. "
            f"Fix: +trainer.max_steps={steps + 1} or more, or +trainer.max_steps=-1 (no limit)"  # + : not a default key
        )
    return None


def limit_reached(trainer, epochs: int, steps: int) -> str | None:
    """Which of the trainer's limits (max_epochs, max_steps) this many epochs and steps reach, if any."""
    if trainer.max_epochs not in (None, -1) and epochs >= trainer.max_epochs:
        return "max_epochs"
    if trainer.max_steps not in (None, -1) and steps >= trainer.max_steps:
        return "max_steps"
    return None


def check_mid_epoch_batches(
    batch_size: int | None, shares: int, shares_key: str, start: StartCheckpoint, order: dict | None = None
) -> None:
    """A checkpoint saved in the middle of an epoch resumes it after the batches it had trained, in
    batches of its size on its number of processes (data/resumable.py). With another batch size or
    number of processes the rest of the epoch was not the samples left: some trained twice,
    others never, without a word. `shares`: the processes that share each epoch's order (1
    without Lightning's distributed sampler); `shares_key`: what sets them. `order`: the rest of
    what the order comes from, as the loader's state keeps it ({"seed": ..., "samples": ...})."""
    ckpt_path = start.path
    try:
        fit = start.state["loops"]["fit_loop"]
        (loader,) = fit["state_dict"]["combined_loader"]
        batches, epoch = int(loader["batches"]), int(loader["epoch"])
        saved = (loader["batch_size"], loader["processes"])
        whole = bool(fit["epoch_loop.batch_progress"]["is_last_batch"])  # saved after the epoch's last batch
    except (KeyError, TypeError, ValueError):  # written before these were kept, or by a loader of one's own
        return
    if batches == 0 or whole:
        return
    _check_same_order(loader, order or {}, f"{batches} batches into epoch {epoch}", epoch, ckpt_path)
    here = (batch_size, shares)
    if batch_size is None or saved == here:
        return
    raise SetupError(
        f"data.batch_size={here[0]} on {here[1]} process(es): the checkpoint was saved {batches} batches into "
        f"epoch {epoch}, whose batches were of {saved[0]} samples on {saved[1]} process(es) ({ckpt_path}); the rest "
        "of that epoch would not be the samples it had left (some trained twice, others never). Fix: resume as it "
        f"was to the epoch's end (data.batch_size={saved[0]}, {saved[1]} process(es) by {shares_key}, "
        f"trainer.max_epochs={epoch + 1}), then resume again with the new size"
    )


ORDER_KEYS = {"seed": "seed={}", "samples": "{} training samples (data.num_samples, data.val_size)"}


def _check_same_order(loader: dict, order: dict, where: str, epoch: int, ckpt_path: str | None) -> None:
    """Another seed or number of samples shuffles the epoch otherwise: its first batches are not the
    ones the checkpoint trained (seed=7 after 42: a quarter of the epoch twice, a quarter never)."""
    known = [key for key in ORDER_KEYS if order.get(key) is not None and loader.get(key) is not None]  # a sampler
    differ = [key for key in known if loader[key] != order[key]]  # of one's own may have no seed; older: no keys
    if not differ:
        return
    now = ", ".join(ORDER_KEYS[key].format(order[key]) for key in differ)
    then = ", ".join(ORDER_KEYS[key].format(loader[key]) for key in differ)
    raise SetupError(
        f"{now}: the checkpoint was saved {where}, whose order of samples came from {then} ({ckpt_path}); the "
        "rest of that epoch would not be the samples it had left (some trained twice, others never). Fix: resume "
        f"as it was to the epoch's end ({then}, trainer.max_epochs={epoch + 1}), then resume again with the change"
    )


def check_same_split(datamodule, start: StartCheckpoint) -> None:
    """The samples a run holds out to validate must stay out of its training: a resume with another
    data.seed or data.val_size (MNIST) trained on samples it had validated on, and chose its best
    checkpoint by them, without a word. Checked where the checkpoint keeps its data module's split
    (data/base.py: split_settings); another data module, or an older checkpoint, passes."""
    saved = start.state.get(type(datamodule).__qualname__)
    saved = saved.get("split") if isinstance(saved, dict) else None
    if not isinstance(saved, dict):
        return
    here = datamodule.split_settings()
    differ = [key for key in here if key in saved and saved[key] != here[key]]
    if differ:
        now = ", ".join(f"{key}={here[key]}" for key in differ)
        then = " ".join(f"{key}={value}" for key, value in saved.items())
        raise SetupError(
            f"{now}: the checkpoint's run ({start.path}) split its data by {then}; another split would train on "
            "samples the run has validated on, and validate on samples it has trained on. "
            f"Fix: leave {', '.join(differ)} out of the resume (the run's: {then}), or start a new run without "
            "resume= / ckpt_path"
        )


def check_deepspeed_world_size(trainer, start: StartCheckpoint) -> None:
    """DeepSpeed resumes its shards only on as many processes as wrote them: with another number
    it stopped inside fit with a traceback ("used a DP world size of 2 but the current world
    size is 1")."""
    ckpt_path = start.path
    if not ckpt_path or not Path(ckpt_path).is_dir():
        return
    saved = start.state.get("dp_world_size")
    if isinstance(saved, int) and saved != (here := trainer.world_size):
        package = __package__.rpartition(".")[0]
        raise SetupError(
            f"ckpt_path={ckpt_path}: a DeepSpeed checkpoint of {saved} processes, and this run has {here}: "
            f"DeepSpeed resumes its shards only on as many. Fix: resume on {saved} processes (trainer.devices, "
            f"trainer.num_nodes), or make it one file (python -m {package}.convert_zero_checkpoint {ckpt_path}) "
            "and start a new run from its weights"
        )


def _saved_state(ckpt_path: str | None) -> dict:
    """The checkpoint's training state, its tensors mapped, not read: the file, or the file in a
    sharded checkpoint's folder that holds it (callbacks/checkpoints.py: state_file). {} where
    there is none or it does not load this way: the checks that use it then leave it to Lightning."""
    from ..callbacks.checkpoints import state_file

    state = state_file(Path(ckpt_path)) if ckpt_path else None
    if state is None or not state.is_file():
        return {}
    import torch

    try:
        return torch.load(state, map_location="cpu", weights_only=True, mmap=True)
    except Exception:
        return {}


def _optimizer_changes(model, states: list, keys: list[str], ckpt_path: str) -> dict[int, dict]:
    """SetupError where an optimizer the model builds cannot step with its saved state (another
    class: a KeyError at the first step); else the settings the config changes, by optimizer."""
    import torch

    changes = {}
    for index, (optimizer, state) in enumerate(zip(_optimizers(model), states, strict=False)):
        groups = state.get("param_groups") if isinstance(state, dict) else None
        if not isinstance(optimizer, torch.optim.Optimizer) or not groups:
            continue
        configured = {key: optimizer.param_groups[0][key] for key in keys if key in optimizer.param_groups[0]}
        optimizer.__setstate__({"state": {}, "param_groups": [dict(group) for group in groups]})  # torch's defaults
        lacking = sorted({key for group in optimizer.param_groups for key in optimizer.defaults if key not in group})
        if lacking:
            name = f"{type(optimizer).__module__}.{type(optimizer).__name__}"
            raise SetupError(
                f"ckpt_path={ckpt_path}: its optimizer state does not fit the optimizer this config builds ({name} "
                f"needs {', '.join(lacking)}){_model_settings()}. Fix: resume with the optimizer the run trained "
                "with (leave out the model.optimizer settings that change it), or start a new run without resume= "
                "/ ckpt_path"
            )
        changes[index] = _changed_settings(configured, groups[0], ckpt_path)
    return {index: changed for index, changed in changes.items() if changed}


def _changed_settings(configured: dict, saved: dict, ckpt_path: str) -> dict:
    """The configured settings that differ from the saved ones, with both. Under a learning-rate
    schedule the saved lr is the schedule's; its start (initial_lr) is what the config set."""
    changed = {key: (saved.get(key), value) for key, value in configured.items() if saved.get(key) != value}
    changed.pop("lr", None)
    if "lr" in configured and configured["lr"] != saved.get("initial_lr", saved.get("lr")):
        if "initial_lr" in saved:
            raise SetupError(
                f"model.optimizer.lr={configured['lr']}: the checkpoint {ckpt_path} follows a learning-rate schedule "
                f"that started at {saved['initial_lr']}, and its scheduler's state would not follow a new start. "
                "Fix: leave model.optimizer.lr out of the resume, or start a new run"
            )
        changed["lr"] = (saved.get("lr"), configured["lr"])
    return changed


def _optimizers(model) -> list:
    """The optimizers the model's configure_optimizers builds, in order; [] where it needs the
    Trainer (Lightning then restores them as it does)."""
    try:
        configured = model.configure_optimizers()
    except Exception:
        return []
    if isinstance(configured, list | tuple) and len(configured) == 2 and isinstance(configured[0], list | tuple):
        configured = configured[0]  # ([optimizers], [schedulers])
    items = configured if isinstance(configured, list | tuple) else [configured]
    return [item.get("optimizer") if isinstance(item, dict) else item for item in items]


def _model_settings() -> str:
    """The command line's overrides that shape the model (the run's own and this start's), as a hint."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return ""
    shaping = [override for override in HydraConfig.get().overrides.task if _key(override).split(".")[0] == "model"]
    return f"; this start's model settings: {' '.join(shaping)}" if shaping else ""
