"""What each config value may be: one row per key, checked on the composed config before
anything runs (launch/command_line.py), so a wrong value stops with one line that names it.

A row whose key is not in the config (e.g. data.num_samples with data=mnist) is skipped.
"""

import difflib
import math
import os
import re
import shlex
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from .errors import SetupError
from .paths import unwritable

_ABSENT = object()


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # True is an int in Python


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def positive_int(value) -> bool:
    return _int(value) and value >= 1


def classes(value) -> bool:
    return _int(value) and value >= 2  # one class: nothing to tell apart (the accuracy refused it, naming model.*)


def non_negative_int(value) -> bool:
    return _int(value) and value >= 0


def seed(value) -> bool:
    return _int(value) and 0 <= value <= 2**32 - 1  # what Lightning's seed_everything (numpy) takes


def boolean(value) -> bool:
    return isinstance(value, bool)


def non_negative_number(value) -> bool:
    return _number(value) and value >= 0


def finite_non_negative(value) -> bool:
    """lr=inf or weight_decay=inf trained on, every loss NaN, and exited 0."""
    return non_negative_number(value) and math.isfinite(value)


def positive_number(value) -> bool:
    return _number(value) and value > 0


def workers(value) -> bool:
    return value == "auto" or non_negative_int(value)


def devices(value) -> bool:
    # Lightning also takes a list of device indices, e.g. [0,2], or -1 for all of them.
    if isinstance(value, ListConfig | list):
        return len(value) > 0 and all(non_negative_int(index) for index in value)
    return value == "auto" or value == -1 or positive_int(value)


def batch_limit(value) -> bool:
    # null = all; an int = that many batches; a float in [0, 1] = that fraction.
    return value is None or non_negative_int(value) or (isinstance(value, float) and 0.0 <= value <= 1.0)


def train_batch_limit(value) -> bool:
    return batch_limit(value) and value != 0  # 0 trained nothing, and the run exited 0


def epochs(value) -> bool:
    return value == -1 or positive_int(value)  # -1: no limit


def clip(value) -> bool:
    return value is None or non_negative_number(value)


def dev_run(value) -> bool:
    return boolean(value) or non_negative_int(value)


def sanity_steps(value) -> bool:
    return _int(value) and value >= -1  # -1: the whole validation set


def run_name(value) -> bool:
    # The run directory is output_root/run_id: a name, not a path that leaves output_root.
    name = str(value)
    plain = name not in ("", ".", "..", "multirun") and "/" not in name  # multirun: the sweeps' folder
    return (_int(value) or isinstance(value, str)) and plain and _fits(name)


def _fits(name: str) -> bool:
    return len(name.encode()) <= 255  # a file name's limit on Linux file systems


def folder(value) -> bool:
    """A folder's path, which may not exist yet, but is not a file."""
    return isinstance(value, str) and bool(value.strip()) and not Path(value).expanduser().is_file()


def boolean_or_auto(value) -> bool:
    return isinstance(value, bool) or value == "auto"


def betas(value) -> bool:
    # Adam's decay rates of its two running averages.
    return isinstance(value, ListConfig | list) and len(value) == 2 and all(_number(v) and 0 <= v < 1 for v in value)


def image_shape(value) -> bool:
    # [channels, height, width]; the CNN's two 3x3 convolutions and 2x2 pooling need 6x6 or more.
    if not (isinstance(value, ListConfig | list) and len(value) == 3 and all(_int(v) for v in value)):
        return False
    return value[0] >= 1 and min(value[1:]) >= 6


def names(value) -> bool:
    """A list of names (a string alone was taken letter by letter)."""
    return isinstance(value, ListConfig | list) and all(isinstance(name, str) and name for name in value)


def top_k(value) -> bool:
    return type(value) is int and value >= -1


def optional(allowed: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or allowed(value)


TIMEDELTA_KEYS = ("weeks", "days", "hours", "minutes", "seconds", "milliseconds", "microseconds")


def duration(value) -> bool:
    """Lightning's time spans (max_time, a time-based val_check_interval): "DD:HH:MM:SS", or
    datetime.timedelta's arguments, e.g. {hours: 23, minutes: 30}; longer than 0 (max_time=0
    trained nothing and exited 0)."""
    if isinstance(value, str):
        parts = re.fullmatch(r"(\d+):(\d\d):(\d\d):(\d\d)", value.strip())
        return parts is not None and any(int(part) for part in parts.groups())
    if isinstance(value, DictConfig | dict):
        spans = value.items()
        return all(key in TIMEDELTA_KEYS and non_negative_number(n) for key, n in spans) and any(n for _, n in spans)
    return False


def count_or_fraction(value) -> bool:
    return non_negative_int(value) or (isinstance(value, float) and 0.0 <= value <= 1.0)


def validation_interval(value) -> bool:
    # Batches between validations, a fraction of an epoch, or a time span (Lightning 2.6).
    return value is None or positive_int(value) or (isinstance(value, float) and 0.0 < value <= 1.0) or duration(value)


def one_of(*allowed) -> Callable[[Any], bool]:
    return lambda value: not isinstance(value, bool) and value in allowed


def compile_mode(value) -> bool:
    return value is False or one_of(*COMPILE_MODES)(value)


ACCELERATORS = ("auto", "cpu", "gpu", "cuda", "mps")  # CPUs, CUDA/ROCm GPUs, Apple GPUs; not TPUs/HPUs
# Lightning's (lightning_fabric's _PRECISION_INPUT, not imported: it loads torch), old aliases last.
PRECISIONS = ("32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true", "64-true", "transformer-engine")
PRECISIONS += ("transformer-engine-float16", "32", "16", "64", "bf16", 32, 16, 64)
IMAGE_SHAPE = "[channels, height, width]: integers, channels >= 1, height and width >= 6"
LIMIT = "null, a number of batches, or a fraction in [0, 1]"
TRAIN_LIMIT = "null, a number of batches >= 1, or a fraction in (0, 1] (0 trains nothing)"
DURATION = 'null, "DD:HH:MM:SS" or {hours: ..., minutes: ...}, longer than 0'
VALIDATION_INTERVAL = 'null, a number of batches >= 1, a fraction of an epoch in (0, 1], or a time "DD:HH:MM:SS" > 0'
MATMUL_PRECISIONS = ("highest", "high", "medium")  # torch.set_float32_matmul_precision's (speed.py)
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")  # torch.compile's
PROFILERS = ("simple", "advanced", "pytorch")  # Lightning's, by name (not xla: no TPUs here)
# Lightning's other names, best and hpc, mean something only within one fit (its best model) or
# for its own SLURM requeue (which this project replaces): a new start resumes with last.
OTHER_CHECKPOINT_NAMES = ("best", "hpc")


def row(key: str, allowed: Callable[[Any], bool], what: str, good_value) -> tuple:
    """A rule whose example for the fix is the key with a good value."""
    return key, allowed, what, f"{key}={good_value}"


def added(argument: str, allowed: Callable[[Any], bool], what: str, good_value) -> tuple:
    """A rule for a Trainer argument that the config adds only with +trainer.<argument>=..."""
    return f"trainer.{argument}", allowed, what, f"+trainer.{argument}={good_value}"


SEED = "an integer from 0 to 4294967295"
# key, is it allowed, what is allowed (said to the user), an example for the fix.
RULES: list[tuple[str, Callable[[Any], bool], str, str]] = [
    # The cluster's first: trainer.devices etc. are read from them (configs/trainer/default.yaml).
    ("cluster.devices", devices, "an integer >= 1 (processes per node), -1 or auto", "cluster.devices=4"),
    ("cluster.num_nodes", positive_int, "an integer >= 1", "cluster.num_nodes=2"),
    ("cluster.accelerator", one_of(*ACCELERATORS), f"one of {', '.join(ACCELERATORS)}", "cluster.accelerator=gpu"),
    ("seed", seed, SEED, "seed=42"),
    ("test_after_fit", boolean, "true or false", "test_after_fit=true"),
    ("run_id", run_name, "a folder name without /, at most 255 bytes, not multirun (the sweeps')", "run_id=my-run"),
    ("data.batch_size", positive_int, "an integer >= 1 (samples per process and step)", "data.batch_size=128"),
    ("data.num_workers", workers, "auto or an integer >= 0 (DataLoader workers per process)", "data.num_workers=auto"),
    ("data.num_samples", positive_int, "an integer >= 1", "data.num_samples=8192"),
    ("data.num_classes", classes, "an integer >= 2", "data.num_classes=10"),
    ("data.image_shape", image_shape, IMAGE_SHAPE, "data.image_shape=[1,28,28]"),
    ("data.root", folder, "a folder (where MNIST is, or is downloaded to), not a file", "data.root=data"),
    ("data.val_size", non_negative_int, "an integer >= 0 (images held out of the 60000)", "data.val_size=5000"),
    ("data.seed", seed, SEED, "data.seed=0"),
    ("data.download", boolean, "true or false", "data.download=true"),
    ("data.on_device", boolean, "true or false", "data.on_device=true"),
    ("data.in_memory", boolean, "true or false", "data.in_memory=true"),
    ("model.optimizer.lr", finite_non_negative, "a finite number >= 0 (the learning rate)", "model.optimizer.lr=1e-3"),
    ("model.optimizer.weight_decay", finite_non_negative, "a finite number >= 0", "model.optimizer.weight_decay=0.01"),
    ("model.optimizer.betas", betas, "two numbers in [0, 1)", "+model.optimizer.betas=[0.9,0.999]"),
    ("model.optimizer.eps", positive_number, "a number > 0", "+model.optimizer.eps=1e-8"),
    ("model.optimizer.fused", boolean_or_auto, "true, false or auto", "model.optimizer.fused=auto"),
    # here before the run folder is made; speed.py checks them again where it applies them
    row("speed.matmul_precision", one_of(*MATMUL_PRECISIONS), f"one of {', '.join(MATMUL_PRECISIONS)}", "high"),
    row("speed.cudnn_benchmark", boolean, "true or false", "true"),
    row("speed.compile", compile_mode, f"false or a torch.compile mode: {', '.join(COMPILE_MODES)}", "default"),
    ("model.num_classes", classes, "an integer >= 2", "model.num_classes=10"),
    ("model.net.hidden", positive_int, "an integer >= 1 (units of the hidden layer)", "model.net.hidden=128"),
    ("model.net.image_shape", optional(image_shape), f"null (MNIST's) or {IMAGE_SHAPE}", "model.net.image_shape=null"),
    ("trainer.max_epochs", epochs, "an integer >= 1 (-1: no limit)", "trainer.max_epochs=10"),
    ("trainer.devices", devices, "an integer >= 1, -1 (all), auto, or a list of device indices", "trainer.devices=2"),
    ("trainer.num_nodes", positive_int, "an integer >= 1", "trainer.num_nodes=1"),
    ("trainer.accelerator", one_of(*ACCELERATORS), f"one of {', '.join(ACCELERATORS)}", "trainer.accelerator=cpu"),
    ("trainer.precision", one_of(*PRECISIONS), f"one of {', '.join(PRECISIONS[:6])}, ...", "trainer.precision=32-true"),
    ("trainer.accumulate_grad_batches", positive_int, "an integer >= 1", "trainer.accumulate_grad_batches=1"),
    ("trainer.gradient_clip_val", clip, "null or a number >= 0", "trainer.gradient_clip_val=1.0"),
    ("trainer.sync_batchnorm", boolean, "true or false", "trainer.sync_batchnorm=false"),
    ("trainer.log_every_n_steps", positive_int, "an integer >= 1", "trainer.log_every_n_steps=50"),
    ("trainer.fast_dev_run", dev_run, "true, false or a number of batches", "trainer.fast_dev_run=true"),
    ("trainer.limit_train_batches", train_batch_limit, TRAIN_LIMIT, "trainer.limit_train_batches=0.1"),
    ("trainer.limit_val_batches", batch_limit, LIMIT, "trainer.limit_val_batches=0.1"),
    ("trainer.profiler", one_of(None, *PROFILERS), f"null or one of {', '.join(PROFILERS)}", "trainer.profiler=simple"),
    ("trainer.num_sanity_val_steps", sanity_steps, "an integer >= 0 (-1: all)", "trainer.num_sanity_val_steps=2"),
    ("trainer.benchmark", optional(boolean), "null, true or false (cudnn's benchmark)", "speed.cudnn_benchmark=true"),
    # Trainer arguments that configs/trainer/default.yaml leaves out, added with +trainer.<key>=...
    added("max_steps", epochs, "an integer >= 1 (-1: no limit)", 10000),
    added("min_epochs", optional(non_negative_int), "null or an integer >= 0", 1),
    added("min_steps", optional(non_negative_int), "null or an integer >= 0", 100),
    added("max_time", optional(duration), DURATION, "00:23:30:00"),
    added("limit_test_batches", batch_limit, LIMIT, 0.1),
    added("limit_predict_batches", batch_limit, LIMIT, 0.1),
    added("overfit_batches", count_or_fraction, "a number of batches or a fraction in [0, 1]", 10),
    added("val_check_interval", validation_interval, VALIDATION_INTERVAL, 0.25),
    added("check_val_every_n_epoch", optional(positive_int), "null or an integer >= 1", 2),
    added("reload_dataloaders_every_n_epochs", non_negative_int, "an integer >= 0", 0),
    added("deterministic", one_of(None, True, False, "warn"), "null, true, false or warn", "true"),
    added("gradient_clip_algorithm", one_of(None, "norm", "value"), "null, norm or value", "norm"),
    added("enable_model_summary", optional(boolean), "null, true or false", "false"),
    added("detect_anomaly", boolean, "true or false", "true"),
    added("inference_mode", boolean, "true or false", "true"),
    added("use_distributed_sampler", boolean, "true or false", "true"),
    # a strategy's own arguments, where its config has them (a string here was taken as true)
    row("strategy.instance.find_unused_parameters", boolean, "true or false", "false"),
    row("strategy.instance.gradient_as_bucket_view", boolean, "true or false", "true"),
    row("strategy.instance.static_graph", boolean, "true or false", "false"),
    row("logger.default_hp_metric", boolean, "true or false", "false"),
    row("callbacks.checkpoint.save_top_k", top_k, "an integer >= -1 (-1: every checkpoint, 0: none)", 1),
    row("strategy.instance.stage", one_of(0, 1, 2, 3), "0, 1, 2 or 3 (ZeRO's stage)", 2),
    row("strategy.instance.offload_optimizer", boolean, "true or false", "true"),
    row("strategy.instance.offload_parameters", boolean, "true or false", "true"),
    row("strategy.instance.layers", optional(names), "null (every module with parameters) or class names", "null"),
    row("callbacks.progress_bar.show", names, "a list of logged metric names", "[train/loss]"),
    row("callbacks.progress_bar.every_n_steps", positive_int, "an integer >= 1", 20),
    row("callbacks.last_checkpoint.every_n_epochs", positive_int, "an integer >= 1 (1: every epoch)", 10),
    row("callbacks.timed_checkpoint.every_minutes", non_negative_number, "a number >= 0 (0: only at epoch ends)", 30),
    row("callbacks.timed_checkpoint.agree_every_seconds", positive_number, "a number > 0 (seconds)", 10),
    row("callbacks.timed_checkpoint.write_in_background", boolean, "true or false", "true"),
    row("callbacks.save_on_stop.agree_every_seconds", positive_number, "a number > 0 (seconds)", 1),
]


def shown(value) -> str:
    """The value as the user would type it back: '' for an empty string, YAML for lists."""
    if value == "" or value is None:
        return "''" if value == "" else "null"
    if isinstance(value, DictConfig | ListConfig):
        return str(OmegaConf.to_container(value)).replace(" ", "")
    if isinstance(value, str) and _read_as_other(value):  # '"128"': text, shown as typed, not as the fix's 128
        return f'"{value}"'
    return str(value).lower() if isinstance(value, bool) else str(value)


def _read_as_other(text: str) -> bool:
    """Hydra reads this text, typed bare in an override, as a number, a bool or null."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return not isinstance(OverridesParser.create().parse_override(f"key={text}").value(), str)
    except Exception:  # not an override's value bare (a space, a bracket): text either way
        return False


def select(cfg: DictConfig, key: str):
    """cfg's value at a dotted key, _ABSENT when the key is not there."""
    try:
        return OmegaConf.select(cfg, key, default=_ABSENT, throw_on_missing=False)
    except Exception as error:  # an interpolation that does not resolve, e.g. ${oc.env:UNSET}
        reason = str(error).strip().splitlines()[0]
        raise SetupError(f"{key}: {reason}. Fix: set what it refers to, or give {key} a value") from error


def check_values(cfg: DictConfig) -> None:
    check_trainer_arguments(select(cfg, "trainer"), select(cfg, "callbacks"))
    check_callbacks(select(cfg, "callbacks"))
    check_run_folders(select(cfg, "callbacks"), select(cfg, "trainer"))
    for key, allowed, what, example in RULES:
        value = select(cfg, key)
        if value is not _ABSENT and not allowed(value):
            variable = from_environment(cfg, key)
            if variable:  # data.root=${oc.env:DATA_DIR,data}: the value is the variable's, not a key typed
                good = example.partition("=")[2]
                fix = f"{variable}={good}, or unset {variable} (then {example})"
                raise SetupError(f"{key}={shown(value)} (from ${variable}): {what}. Fix: e.g. {fix}")
            raise SetupError(f"{key}={shown(value)}: {what}. Fix: e.g. {example}")
    check_no_home_sign(cfg)
    check_output_root(select(cfg, "output_root"))
    check_logger_folder(select(cfg, "logger"))
    check_checkpoint(select(cfg, "ckpt_path"))
    check_compile_strategy(select(cfg, "speed"), select(cfg, "strategy"))


def from_environment(cfg: DictConfig, key: str) -> str | None:
    """The environment variable that `key`'s value comes from (${oc.env:NAME,...}); None otherwise."""
    parent, _, name = key.rpartition(".")
    node = OmegaConf.select(cfg, parent, default=None) if parent else cfg
    if not isinstance(node, DictConfig) or name not in node:
        return None
    found = re.fullmatch(r"\$\{oc\.env:(\w+)(,[^}]*)?\}", str(node._get_node(name)._value()))
    return found.group(1) if found else None


def check_compile_strategy(speed, strategy) -> None:
    """speed.compile under a strategy that cannot take a compiled model (its config's no_compile says why):
    here, so that the renderer refuses it too (speed.py refused it only on the nodes, after the queue)."""
    if not isinstance(speed, DictConfig) or not isinstance(strategy, DictConfig):
        return
    mode, refused = speed.get("compile"), strategy.get("no_compile")
    if mode not in (False, None) and refused:
        raise SetupError(
            f"speed.compile={mode} cannot be used with strategy={strategy.get('name')}: {refused}. "
            "Fix: speed.compile=false, or strategy=ddp"
        )


# The arguments of Lightning 2.6's Trainer (tests/test_train_bad_inputs.py compares them with
# the installed Lightning's); run.py passes the three below itself, from their config groups.
TRAINER_ARGUMENTS = (
    "accelerator", "strategy", "devices", "num_nodes", "precision", "logger", "callbacks", "fast_dev_run",
    "max_epochs", "min_epochs", "max_steps", "min_steps", "max_time", "limit_train_batches", "limit_val_batches",
    "limit_test_batches", "limit_predict_batches", "overfit_batches", "val_check_interval", "check_val_every_n_epoch",
    "num_sanity_val_steps", "log_every_n_steps", "enable_checkpointing", "enable_progress_bar", "enable_model_summary",
    "accumulate_grad_batches", "gradient_clip_val", "gradient_clip_algorithm", "deterministic", "benchmark",
    "inference_mode", "use_distributed_sampler", "profiler", "detect_anomaly", "barebones", "plugins",
    "sync_batchnorm", "reload_dataloaders_every_n_epochs", "default_root_dir", "enable_autolog_hparams",
    "model_registry",
)  # fmt: skip
SET_BY_RUN = {
    "strategy": "strategy=ddp (a config of configs/strategy/)",
    "callbacks": "callbacks.<name>.<key>=... to change one, ~callbacks.<name> to remove one (configs/callbacks/)",
    "logger": "logger=csv, logger=tensorboard, or ~logger for none (configs/logger/)",
}


def check_trainer_arguments(trainer, callbacks) -> None:
    """Keys added with +trainer.<key>=... go to Lightning's Trainer as they are: each must be
    one of its arguments, not one that run.py builds from its own config group, and not one
    that Lightning refuses beside the project's callbacks (run.py still turns any other refusal
    of the Trainer's into one line)."""
    if not isinstance(trainer, DictConfig):
        return
    callbacks = callbacks if isinstance(callbacks, DictConfig) else {}
    for key in map(str, trainer.keys()):  # names only: the values are read for the message alone
        if key in SET_BY_RUN:
            value = shown(select(trainer, key))
            raise SetupError(f"trainer.{key}={value}: set by the project, not here. Fix: {SET_BY_RUN[key]}")
        if key != "_target_" and key not in TRAINER_ARGUMENTS:
            value = shown(select(trainer, key))
            close = difflib.get_close_matches(key, TRAINER_ARGUMENTS, n=1)
            fix = f"did you mean +trainer.{close[0]}={value}? Else remove +trainer.{key}" if close else ""
            fix = fix or f"remove +trainer.{key}; the Trainer's arguments: {', '.join(TRAINER_ARGUMENTS)}"
            raise SetupError(f"trainer.{key}={value}: not an argument of Lightning's Trainer. Fix: {fix}")
    if select(trainer, "barebones") is True:
        raise SetupError(
            "trainer.barebones=true: Lightning's barebones Trainer takes no logger, progress bar or checkpoints, "
            "which this project's runs need. Fix: remove +trainer.barebones (the project's own per-step costs are "
            "cut already: docs/performance.md)"
        )
    if select(trainer, "enable_progress_bar") is False and "progress_bar" in callbacks:
        raise SetupError(
            "trainer.enable_progress_bar=false: the bar is the callback callbacks.progress_bar. "
            "Fix: ~callbacks.progress_bar instead"
        )
    checkpoints = [name for name, callback in callbacks.items() if _saves_checkpoints(callback)]
    if select(trainer, "enable_checkpointing") is False and checkpoints:
        removed = " ".join(f"~callbacks.{name}" for name in checkpoints)
        raise SetupError(
            f"trainer.enable_checkpointing=false: callbacks {', '.join(checkpoints)} save checkpoints (last.ckpt "
            f"keeps a run resumable). Fix: leave it out, or to train without them: {removed}"
        )


def check_callbacks(callbacks) -> None:
    """Each entry of callbacks: builds one (a _target_); callbacks.<name>=null does not remove one."""
    if not isinstance(callbacks, DictConfig):
        return
    for name in map(str, callbacks.keys()):
        callback = callbacks._get_node(name)
        if not isinstance(callback, DictConfig) or "_target_" not in callback:
            raise SetupError(
                f"callbacks.{name}={shown(select(callbacks, name))}: a callback needs a _target_ (the class to build). "
                f"Fix: ~callbacks.{name} to leave it out, or +callbacks.{name}._target_=<module.Class> to add one"
            )


RUN = "${output_dir}"  # the run's folder (configs/train.yaml); the project's callbacks use it as below
OWN_FOLDERS = {  # where resume=, the refusal of a second run in a folder and a requeued job look
    ".LastCheckpoint": ("dirpath", f"{RUN}/checkpoints"),
    ".TimedCheckpoint": ("dirpath", f"{RUN}/checkpoints"),
    ".SaveOnStop": ("dirpath", f"{RUN}/checkpoints"),
}


def check_run_folders(callbacks, trainer) -> None:
    """A run writes inside its own folder only. A checkpoint callback given another run's folder
    overwrote that run's checkpoints, with exit 0; the project's last, timed and stop checkpoints
    elsewhere, or trainer.default_root_dir (Slurm's requeue checkpoint), went where resume= and a
    requeued job did not look. A callback of your own may use any folder inside the run's."""
    given = []  # (key, value as written, the folder it must be, or None: any inside the run's)
    raw = OmegaConf.to_container(callbacks, resolve=False) if isinstance(callbacks, DictConfig) else {}
    for name, callback in raw.items():
        target = str(callback.get("_target_", "")) if isinstance(callback, dict) else ""
        own = next((folder for suffix, folder in OWN_FOLDERS.items() if target.endswith(suffix)), None)
        for key in ("dirpath", "run_dir"):
            if isinstance(callback, dict) and key in callback:
                exact = own[1] if own and own[0] == key else RUN if key == "run_dir" else None
                given.append((f"callbacks.{name}.{key}", callback[key], exact))
        if target.endswith("ModelCheckpoint") and callback.get("filename") is not None:
            in_checkpoints = str(callback.get("dirpath", "")).rstrip("/") == f"{RUN}/checkpoints"
            _check_checkpoint_name(f"callbacks.{name}.filename", str(callback["filename"]), in_checkpoints)
    if isinstance(trainer, DictConfig) and "default_root_dir" in trainer:
        root = OmegaConf.to_container(trainer, resolve=False)["default_root_dir"]
        given.append(("trainer.default_root_dir", root, RUN))
    for key, value, exact in given:
        folder = str(value).replace("${hydra:runtime.output_dir}", RUN).rstrip("/") if value is not None else None
        if folder != exact if exact else not inside_run(folder):
            where = f"the run's own folder ({exact})" if exact else f"a folder inside the run's ({RUN}/...)"
            raise SetupError(
                f"{key}={shown(value)}: {where}, where resume= and a requeued job look for its checkpoints, and no "
                "other run writes. Fix: leave it out; for checkpoints on another disk, output_root=<a folder there>"
            )


def inside_run(folder: str | None) -> bool:
    """A folder as written (${output_dir}/...) that is the run's or inside it."""
    return folder is not None and (folder == RUN or folder.startswith(f"{RUN}/")) and ".." not in Path(folder).parts


def _check_checkpoint_name(key: str, name: str, in_checkpoints: bool) -> None:
    """A checkpoint's name inside its dirpath. An absolute one or one with .. wrote outside the run
    (every run the same file); "last" in the run's checkpoints/ wrote last.ckpt, which its next best
    then removed, newest work and best both."""
    if Path(name).is_absolute() or ".." in Path(name).parts:
        problem = "a name inside its dirpath (the run's checkpoints/), where resume= looks"
    elif in_checkpoints and name.removesuffix(".ckpt") == "last":
        problem = "the name of last.ckpt, the run's newest work, which this callback's next best would remove"
    else:
        return
    raise SetupError(f"{key}={name}: {problem}. Fix: leave it out (epoch=<N>-step=<N>.ckpt), or a name such as best")


def _saves_checkpoints(callback) -> bool:
    """A Lightning Checkpoint callback of configs/callbacks/ (Lightning refuses those without checkpointing)."""
    target = str(callback.get("_target_", "")) if isinstance(callback, DictConfig) else ""
    return target.endswith(("ModelCheckpoint", ".LastCheckpoint"))


HOME_TO_A_SHELL_ONLY = (
    "~ means your home folder to a shell only (Hydra cannot read it there; quoted, it is a folder named ~)"
)
PATHS = ("output_root", "data.root", "ckpt_path", "logger.save_dir", "hydra.run.dir", "hydra.sweep.dir")


def home_sign(key: str, value: str) -> str:
    """The line for a path that begins with ~, with the home folder spelled out as the fix."""
    return f"{key}={value}: {HOME_TO_A_SHELL_ONLY}. Fix: {shlex.quote(f'{key}={os.path.expanduser(value)}')}"


def check_no_home_sign(cfg) -> None:
    """A path quoted with its ~ ('output_root="~/runs"', as a fix once said) ran in a folder named ~
    inside the project."""
    for key in PATHS:
        parent, _, name = key.rpartition(".")
        node = select(cfg, parent) if parent else cfg
        if not isinstance(node, DictConfig) or name not in node or OmegaConf.is_interpolation(node, name):
            continue  # ${output_dir} and the like: their parts are checked
        value = node[name]
        if isinstance(value, str) and value.startswith("~"):
            raise SetupError(home_sign(key, value))


def check_output_root(root) -> None:
    """Hydra makes the run directory under it: it must be a directory we may write, or creatable."""
    if root is _ABSENT:
        return
    if not isinstance(root, str) or not root:
        raise SetupError(f"output_root={shown(root)}: a directory path. Fix: output_root=outputs")
    reason = unwritable(Path(root), folder=True)
    if reason:
        raise SetupError(
            f"output_root={root}: {reason}. Fix: a directory you can write, e.g. output_root=$HOME/outputs "
            "(on a cluster: its scratch disk)"
        )


FOLDER_LOGGERS = ("TensorBoardLogger", "CSVLogger", "AppendingCSVLogger")  # save_dir/name/version


def check_logger_folder(logger) -> None:
    """A folder of the logger's own (by default the run's: ${output_dir}, which Hydra sets later and
    output_root's check covers): one it cannot make met a traceback once the run folder was made."""
    if not isinstance(logger, DictConfig) or "save_dir" not in logger:
        return
    save_dir = None if OmegaConf.is_interpolation(logger, "save_dir") else logger.save_dir
    reason = isinstance(save_dir, str) and save_dir and unwritable(Path(save_dir), folder=True)
    if reason:
        raise SetupError(
            f"logger.save_dir={save_dir}: {reason}. Fix: leave it out (the logs go into the run's folder), "
            "or a directory you can write"
        )
    if str(logger.get("_target_")).rsplit(".", 1)[-1] not in FOLDER_LOGGERS:  # W&B's name names the run
        return
    elsewhere = "for logs on another disk, output_root=<a folder there> (the runs' folders go there)"
    for key in ("name", "version"):  # folders below save_dir: /proc/x met a traceback, ../../x wrote elsewhere
        part = logger.get(key)
        if isinstance(part, str) and (Path(part).is_absolute() or ".." in Path(part).parts):
            raise SetupError(
                f"logger.{key}={part}: a folder inside logger.save_dir (the run's folder), where the logs go. "
                f"Fix: a name such as logger.{key}=logs; {elsewhere}"
            )
    # A folder outside the run's is every such run's: a second run wrote its metrics into the first's
    # metrics.csv (its steps from 0 again) and its hparams.yaml over the first's, with exit 0.
    raw = OmegaConf.to_container(logger, resolve=False)
    folder = str(raw["save_dir"]).rstrip("/")
    for own in ("${hydra:runtime.output_dir}", "${hydra:run.dir}"):
        folder = folder.replace(own, RUN)
    per_run = any("${run_id}" in str(raw.get(key)) for key in ("name", "version"))  # a folder of each run's there
    if not inside_run(folder) and not per_run:
        raise SetupError(
            f"logger.save_dir={raw['save_dir']}: a folder outside the run's, where every run given it writes its logs "
            "into the same files. Fix: leave it out (each run's logs in its folder; tensorboard --logdir outputs "
            "shows them all), or also 'logger.version=${run_id}' (a folder per run there); " + elsewhere
        )


def check_checkpoint(ckpt_path) -> None:
    """A file Lightning can resume from: exists, readable, a torch.save zip that loads with
    weights_only=True (what Lightning does; anything else could run code from the file)."""
    if ckpt_path is _ABSENT or ckpt_path is None or ckpt_path == "last":
        return
    fix = "Fix: ckpt_path=last with run_id=<the run>, or the path of a .ckpt file from a run's checkpoints/"
    if not str(ckpt_path).strip():  # the working folder to Path(): a traceback once the run had started
        raise SetupError(f"ckpt_path={ckpt_path!r}: a checkpoint to start from. {fix}; or leave it out to start fresh")
    if ckpt_path in OTHER_CHECKPOINT_NAMES:  # before: Lightning's ValueError once the run had started
        raise SetupError(
            f"ckpt_path={ckpt_path}: Lightning's name for a checkpoint of the fit it is running, none when a run "
            f"starts. {fix} (the best one is epoch=...-step=....ckpt there)"
        )
    path = Path(str(ckpt_path)).expanduser()
    if not path.exists():
        raise SetupError(f"ckpt_path={ckpt_path}: no such file or directory. {fix}")
    if path.is_dir():
        return  # a sharded checkpoint (DeepSpeed, FSDP2): one file per process, read by the strategy
    if not os.access(path, os.R_OK):
        raise SetupError(f"ckpt_path={ckpt_path}: not readable by this user. Fix: chmod u+r {path}, or copy it")
    if not zipfile.is_zipfile(path):  # empty, truncated and random files all fail here
        size = path.stat().st_size
        raise SetupError(
            f"ckpt_path={ckpt_path}: not a PyTorch checkpoint ({size} bytes, empty, truncated or another format). {fix}"
        )
    import torch

    try:  # mmap: the tensors are not read, so a large checkpoint costs little here
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:
        lines = str(error).strip().splitlines() or [type(error).__name__]
        # torch's own message offers weights_only=False: never the advice for a file of unknown origin.
        reason = "it holds objects other than tensors and plain values" if "eights only" in lines[0] else lines[0]
        raise SetupError(f"ckpt_path={ckpt_path}: does not load as a checkpoint ({reason}). {fix}") from error
    if not isinstance(checkpoint, dict) or "pytorch-lightning_version" not in checkpoint:
        raise SetupError(f"ckpt_path={ckpt_path}: a torch file, but not a Lightning checkpoint (a state dict?). {fix}")
