"""An experiment given after --, as in
`python -m {{ cookiecutter.package_name }}.slurm cluster=puhti -- experiment=big`, is read by
train.py on the nodes, after this command wrote the script's #SBATCH lines and its train.py
command. What the file sets of those (its choice of cluster or strategy, cluster.slurm.time, the
job's size) then changed nothing, without a word: the job was not the one the file asks for.
Found here, before any file is written, with the setting that renders it."""

from omegaconf import DictConfig, OmegaConf

from ..launch.command_line import compose_train, search_paths
from ..launch.values import shown
from .profiles import ProfileError
from .render import Job

# Read by this command alone (the script's #SBATCH lines, modules, variables, the offline switch)
RENDERED = ("slurm", "detect", "internet")
# What the script gives train.py first, and the setting before -- that makes it
JOB_SETTINGS = {"num_nodes": "nodes", "devices": "gpus"}


def _is_experiment(override: str) -> bool:
    return override.lstrip("+").partition("=")[0] == "experiment"


def check_experiments(job: Job) -> None:
    """Refuse an experiment after -- that sets what the script has fixed otherwise (ProfileError)."""
    given = [override for override in job.train_overrides if _is_experiment(override)]
    if not given:
        return
    said = f"-- {given[-1]}"
    search = search_paths(job.train_overrides)
    alone, default = compose_train([*search, given[-1]]), compose_train(search)
    job_choices = {"cluster": job.cluster["name"], "strategy": job.strategy}
    for group, rendered in job_choices.items():
        chosen = alone.hydra.runtime.choices.get(group)
        if chosen != default.hydra.runtime.choices.get(group) and chosen != rendered:
            raise ProfileError(
                f"{said} chooses {group}={chosen}, but the script is rendered for {group}={rendered}, which it gives "
                f"train.py first (and which wins over the file's choice). Fix: {group}={chosen} before --"
            )
    # The same cluster and strategy without the file: what the file itself sets
    without = compose_train([*search, *(f"{group}={alone.hydra.runtime.choices[group]}" for group in job_choices)])
    sizes = {"num_nodes": job.nodes, "devices": job.gpus}
    for key in (*RENDERED, *sizes):
        path = _set_by_the_file(_plain(alone.cluster.get(key)), _plain(without.cluster.get(key)), key)
        if path is None:
            continue
        value = _at(_plain(alone.cluster), path)
        if key in sizes:
            if value != sizes[key]:
                raise ProfileError(
                    f"{said} sets cluster.{path}={shown(value)}, but the job's size is this command's "
                    f"{JOB_SETTINGS[key]}={sizes[key]}, which the script gives train.py first (and which wins). "
                    f"Fix: {JOB_SETTINGS[key]}={shown(value)} before --"
                )
            continue
        rendered = _at(job.cluster, path)
        if value == rendered:
            continue
        sign = "" if rendered is not _ABSENT else "+"
        now = "" if rendered is _ABSENT else f" ({shown(rendered)} here)"
        raise ProfileError(
            f"{said} sets cluster.{path}={shown(value)}, which only this command reads, for the script{now}: train.py "
            f"reads the file on the nodes, after the script was written. Fix: {sign}cluster.{path}={shown(value)} "
            "before --"
        )


_ABSENT = object()


def _plain(node):
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


def _set_by_the_file(mine, other, path: str) -> str | None:
    """The first key under `path` where the file's config (`mine`) differs from the one without it."""
    if isinstance(mine, dict):
        for key, value in mine.items():
            inner = other.get(key, _ABSENT) if isinstance(other, dict) else _ABSENT
            if found := _set_by_the_file(value, inner, f"{path}.{key}"):
                return found
        return None
    return None if mine == other else path


def _at(config: dict, path: str):
    for key in path.split("."):
        if not isinstance(config, dict) or key not in config:
            return _ABSENT
        config = config[key]
    return config
