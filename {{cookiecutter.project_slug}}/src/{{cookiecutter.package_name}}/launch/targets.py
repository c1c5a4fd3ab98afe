"""What an override adds to something the config builds (a node with `_target_`: the model,
its optimizer, the data, a callback): the class or function must take each added argument,
and a `_target_` given on the command line must import. Checked with the other values before
anything runs (launch/command_line.py); otherwise the run would stop later, on Hydra's report
or inside Lightning's fit, where the optimizer is built. Also read from a target: the optimizer's
default eps, which pure float16 (trainer.precision=16-true) cannot hold, and the data's number
of classes where the config does not say it (MNIST's)."""

import difflib
import importlib
import inspect

from omegaconf import DictConfig, ListConfig, OmegaConf

from .errors import SetupError
from .values import _ABSENT, _int, shown


def check_added_arguments(cfg, overrides: list[str]) -> None:
    """Raise SetupError (one line) where an override adds an argument that its target does not take.
    Imports only those targets; the Trainer's arguments are checked without importing Lightning
    (values.py)."""
    for override in overrides:
        typed = override.partition("=")[0]
        parent, _, name = typed.lstrip("+").rpartition(".")
        added = typed.startswith("+") or name == "_target_"
        if not added or not parent or parent.split(".")[0] in ("hydra", "trainer"):
            continue
        node = OmegaConf.select(cfg, parent, default=None)
        if not isinstance(node, DictConfig) or "_target_" not in node:
            continue
        target = str(node.get("_target_"))
        taken = _arguments(target, f"{parent}._target_")
        if name == "_target_":
            _check_role(parent, target)
        if taken is None:
            continue
        if name != "_target_":
            given = {name: f"remove {typed}"}
        else:  # the node's own keys go to the new target too
            given = {str(key): f"~{parent}.{key}" for key in node.keys() if not str(key).startswith("_")}
        for argument, removal in given.items():
            if argument not in taken:
                raise SetupError(_not_taken(parent, argument, node, target, taken, removal))


# What the run hands a config node's object to takes only this kind of object: the Lightning
# class it must derive from, and what it is for.
ROLES = {
    "model": ("LightningModule", "what the Trainer trains"),
    "data": ("LightningDataModule", "what the Trainer takes its batches from"),
    "logger": ("Logger", "what the Trainer logs to"),
    "callbacks": ("Callback", "what the Trainer calls at each step"),
}
LIGHTNING = ("pytorch_lightning.", "lightning.")


def _check_role(parent: str, target: str) -> None:
    """A `_target_` that builds another kind of object (model._target_=torch.nn.Linear) met
    Hydra's report on the model's own keys, or Lightning's TypeError once the run had started."""
    from .command_line import choices

    group = "callbacks" if parent.startswith("callbacks.") else parent
    built = _locate(target)
    if group not in ROLES or not inspect.isclass(built):  # a function that builds one: the run will say
        return
    base, what = ROLES[group]
    if not any(cls.__name__ == base and cls.__module__.startswith(LIGHTNING) for cls in inspect.getmro(built)):
        configs = " or ".join(f"{group}={name}" for name in choices(group)) if group != "callbacks" else ""
        raise SetupError(
            f"{parent}._target_={target}: not a {base} ({what}). Fix: "
            + (f"{configs}, or " if configs else "a class of pytorch_lightning.callbacks, or ")
            + f"the dotted path of a {base} of your own"
        )


def _not_taken(parent: str, argument: str, node, target: str, taken: list[str], removal: str) -> str:
    value = shown(OmegaConf.to_container(node, resolve=False)[argument])
    close = difflib.get_close_matches(argument, taken, n=1)
    fix = removal
    if close:
        plus = "" if close[0] in node else "+"  # a key the config has is set without +
        fix = f"did you mean {plus}{parent}.{close[0]}={value}? Else {fix}"
    return f"{parent}.{argument}={value}: not an argument of {target} (it takes {', '.join(taken)}). Fix: {fix}"


def _arguments(target: str, key: str) -> list[str] | None:
    """The keyword arguments that `target` takes; None where it takes any (**kwargs)."""
    try:
        built = _locate(target)
    except (ImportError, AttributeError) as error:
        raise SetupError(
            f"{key}={target}: does not import ({error}). Fix: the dotted path of a class or "
            "function that imports here, e.g. torch.optim.AdamW"
        ) from error
    try:
        parameters = list(inspect.signature(built).parameters.values())
    except (TypeError, ValueError):  # no signature to read (some C functions): the run will say
        return None
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    taken = [parameter.name for parameter in parameters if parameter.kind in keyword]
    if any(parameter.kind is parameter.VAR_KEYWORD for parameter in parameters):
        passed_on = _passed_on(built)
        return None if passed_on is None else taken + [name for name in passed_on if name not in taken]
    return taken


# Lightning's loggers that take **kwargs: what they hand them to (the first of these that imports,
# as the logger picks it), less what the logger sets itself. An argument that neither takes fails
# only once the run has started, inside the logger.
PASSED_ON = {
    "TensorBoardLogger": (("torch.utils.tensorboard.SummaryWriter", "tensorboardX.SummaryWriter"), {"log_dir"}),
    "WandbLogger": (("wandb.init",), set()),
}


def _passed_on(built) -> list[str] | None:
    """The keyword arguments of what `built` hands its **kwargs to; None where unknown (any is taken)."""
    if not str(getattr(built, "__module__", "")).startswith(LIGHTNING):
        return None
    targets, set_by_logger = PASSED_ON.get(getattr(built, "__name__", ""), ((), set()))
    for target in targets:
        try:
            taken = _arguments(target, target)
        except SetupError:  # not installed: the next one
            continue
        return None if taken is None else [name for name in taken if name not in set_by_logger]
    return None


def _locate(target: str):
    """The object at a dotted path, as Hydra finds a _target_ (its own lookup also logs the error)."""
    parts = target.split(".")
    for end in range(len(parts), 0, -1):  # the longest prefix that is a module, then attributes
        try:
            found = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for name in parts[end:]:
            found = getattr(found, name)
        return found
    raise ImportError(f"no module named {parts[0]!r}")


FLOAT16_SMALLEST_NORMAL = 6.1e-05  # torch.finfo(torch.float16).tiny, without importing torch here


def check_optimizer_precision(cfg, overrides: list[str]) -> None:
    """Under trainer.precision=16-true the optimizer's state is float16 too (DeepSpeed keeps it
    in float32). An `eps` below float16's smallest normal number (torch's default for Adam and
    AdamW, 1e-8, rounds to 0) lets Adam's update overflow where a gradient's square underflows:
    the run trains on and ends in NaN (measured: eps 1e-8 and 1e-6 NaN, 3e-5 and 1e-4 train)."""
    optimizer = OmegaConf.select(cfg, "model.optimizer", default=None)
    strategy = str(OmegaConf.select(cfg, "strategy.name", default=""))
    if OmegaConf.select(cfg, "trainer.precision", default=None) != "16-true" or strategy.startswith("deepspeed"):
        return
    if not isinstance(optimizer, DictConfig) or "_target_" not in optimizer:
        return
    eps = optimizer.get("eps")
    if eps is None:  # the target's default
        try:
            eps = inspect.signature(_locate(str(optimizer._target_))).parameters["eps"].default
        except (ImportError, AttributeError, KeyError, TypeError, ValueError):  # no eps: nothing to check
            return
    if isinstance(eps, int | float) and not isinstance(eps, bool) and eps < FLOAT16_SMALLEST_NORMAL:
        added = "eps" not in optimizer or any(override.startswith("+model.optimizer.eps=") for override in overrides)
        plus = "+" if added else ""  # as the user typed it: a key the config files lack needs +
        raise SetupError(
            f"trainer.precision=16-true: the optimizer's eps ({eps:g}) is below float16's smallest normal number "
            f"({FLOAT16_SMALLEST_NORMAL:g}), so with its state in float16 its updates overflow and training ends in "
            f"NaN. Fix: trainer.precision=16-mixed (float32 weights; or bf16-mixed where the GPU has bfloat16), "
            f"or {plus}model.optimizer.eps=1e-4"
        )


PACKAGE = __package__.split(".")[0]
MODEL_PARTS = {"net": "the network it trains", "optimizer": "the optimizer that trains it"}


def check_model_parts(cfg) -> None:
    """model.net=null or model.optimizer=null (or 5): the model was built without it, and its first step
    met a traceback ("optimizer got an empty parameter list", "'NoneType' object is not callable")
    once the run folder was made."""
    model = OmegaConf.select(cfg, "model", default=None)
    # The project's models build both parts from a node with _target_; a model of one's own may take other values.
    ours = isinstance(model, DictConfig) and str(model.get("_target_")).startswith(f"{PACKAGE}.models.")
    for key, what in MODEL_PARTS.items():
        part = OmegaConf.select(model, key, default=_ABSENT) if isinstance(model, DictConfig) else _ABSENT
        built = isinstance(part, DictConfig) and "_target_" in part
        if part is None or (ours and part is not _ABSENT and not built):
            raise SetupError(
                f"model.{key}={shown(part)}: the model needs {what}, built from a _target_. Fix: leave model.{key} out "
                f"(the model config's), or model.{key}._target_=<module.Class> for one of your own"
            )


def check_classes(cfg) -> None:
    """A classifier needs a logit for each of the data's classes (else an IndexError in its first
    step). Checked where model.num_classes is set by hand instead of following the data; and the
    network's, where model.net.num_classes is (the accuracy's ValueError in the first validation)."""
    model = OmegaConf.select(cfg, "model", default=None)
    net = OmegaConf.select(cfg, "model.net", default=None)
    if isinstance(net, DictConfig) and "num_classes" in net and not OmegaConf.is_interpolation(net, "num_classes"):
        classes = OmegaConf.select(cfg, "model.num_classes", default=None)
        if classes is not None and net.num_classes != classes:
            raise SetupError(
                f"model.net.num_classes={net.num_classes}: the network's outputs are the model's classes "
                f"(model.num_classes={classes}, which its loss and accuracy count). Fix: leave model.net.num_classes "
                f"out (it follows model.num_classes), or model.num_classes={net.num_classes}"
            )
    if not isinstance(model, DictConfig) or "num_classes" not in model:
        return
    if OmegaConf.is_interpolation(model, "num_classes"):  # follows the data (configs/model/cnn.yaml)
        return
    where, data_classes = _data_value(cfg, "num_classes")
    if _int(model.num_classes) and _int(data_classes) and model.num_classes < data_classes:
        raise SetupError(
            f"model.num_classes={model.num_classes}: fewer than the data's {data_classes} classes ({where}). "
            f"Fix: leave model.num_classes out (it follows the data), or model.num_classes={data_classes}"
        )


def check_image_shape(cfg) -> None:
    """The network is built for images of model.net.image_shape: set by hand to another shape than
    the data's, the first step met a traceback (shapes cannot be multiplied), after the run folder
    was made. Checked where it is set by hand instead of following the data."""
    net = OmegaConf.select(cfg, "model.net", default=None)
    if not isinstance(net, DictConfig) or "image_shape" not in net or OmegaConf.is_interpolation(net, "image_shape"):
        return
    shape = OmegaConf.select(cfg, "model.net.image_shape", default=None)
    where, data_shape = _data_value(cfg, "image_shape")
    if shape is None or not isinstance(data_shape, list | tuple | ListConfig) or list(shape) == list(data_shape):
        return  # not stated as a list by the data (a property of the class, say): the run will tell
    shown = f"[{','.join(map(str, data_shape))}]"
    raise SetupError(
        f"model.net.image_shape=[{','.join(map(str, shape))}]: the data's images are {shown} ({where}). "
        f"Fix: leave model.net.image_shape out (it follows the data), or model.net.image_shape={shown}"
    )


def _data_value(cfg, key: str) -> tuple[str, object]:
    """Where the data states `key`, and its value: data.<key>, or the DataModule class's own
    (MNIST's 10 classes and [1,28,28] images); None where neither says."""
    value = OmegaConf.select(cfg, f"data.{key}", default=None)
    target = OmegaConf.select(cfg, "data._target_", default=None)
    if value is not None or target is None:
        return f"data.{key}", value
    try:
        return f"{target}.{key}", getattr(_locate(str(target)), key, None)
    except (ImportError, AttributeError):  # the run will say
        return f"data.{key}", None
