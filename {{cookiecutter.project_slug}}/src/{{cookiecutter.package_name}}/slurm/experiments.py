"""An experiment given after --, as in
`python -m {{ cookiecutter.package_name }}.slurm cluster=puhti -- experiment=big`, or to a rendered script, as in
`sbatch scripts/run-gpu8.sh experiment=big`, is read by train.py on the nodes, after the script's
#SBATCH lines and its train.py command were written (and read by sbatch). What the file sets of
those (its choice of cluster or strategy, cluster.slurm.time, the job's size) then changed
nothing, without a word: the job was not the one the file asks for. Found by the renderer before
any file is written, and by the script before the launch
(`python -m {{ cookiecutter.package_name }}.slurm.arguments`)."""

import copy
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf

from ..launch.command_line import compose_train, search_paths
from ..launch.values import shown
from .profiles import ProfileError
from .render import Job, render

# Read by the renderer alone (the script's #SBATCH lines, modules, variables, the offline switch)
RENDERED = ("slurm", "detect", "internet")
# What the script gives train.py first, and the setting of the renderer's that makes it
JOB_SETTINGS = {"num_nodes": "nodes", "devices": "gpus"}
WINS = " on its command line, which wins over the file"


@dataclass
class Conflict:
    """What an experiment file asks of the job that the job's script does not give."""

    experiment: str  # the override: experiment=big
    kind: str  # choice (of cluster or strategy), size (nodes, GPUs) or rendered (cluster.slurm.*, ...)
    key: str  # cluster, strategy, cluster.num_nodes, cluster.slurm.time, ...
    value: object  # the file's
    script: object  # the script's (_ABSENT: it has none)
    fix: str  # the renderer's setting that gives the job the file's value: nodes=2, cluster.slurm.time=05:00:00

    def renderer_line(self, said: str) -> str:
        """The renderer's refusal; `said` names the experiment as the user gave it."""
        if self.kind == "choice":
            return (
                f"{said} chooses {self.key}={self.value}, but the script is rendered for {self.key}={self.script}, "
                f"which it gives train.py first (and which wins over the file's choice). Fix: {self.fix} before --"
            )
        if self.kind == "size":
            return (
                f"{said} sets {self.key}={shown(self.value)}, but the job's size is this command's "
                f"{self.fix.partition('=')[0]}={self.script}, which the script gives train.py first (and which "
                f"wins). Fix: {self.fix} before --"
            )
        now = "" if self.script is _ABSENT else f" ({shown(self.script)} here)"
        return (
            f"{said} sets {self.key}={shown(self.value)}, which only this command reads, for the script{now}: "
            f"train.py reads the file on the nodes, after the script was written. Fix: {self.fix} before --"
        )

    def script_line(self, render_command: str) -> str:
        """The refusal of a script given the experiment as an argument, with the command that renders
        and submits a script for it."""
        what = f"{self.experiment}, an argument of this script,"
        if self.kind == "choice":
            why = f"chooses {self.key}={self.value}, but the script gives train.py {self.key}={self.script}{WINS}"
        elif self.kind == "size":
            why = f"sets {self.key}={shown(self.value)}, but the script gives train.py {self.key}={self.script}{WINS}"
        else:
            has = "none" if self.script is _ABSENT else shown(self.script)
            why = (
                f"sets {self.key}={shown(self.value)}, which only the renderer reads, for a script's lines; this one "
                f"has {has}, which sbatch read before train.py reads the file"
            )
        return f"{what} {why}. Fix: submit a script rendered for it, {render_command}"


def is_experiment(override: str) -> bool:
    return override.lstrip("+").partition("=")[0] == "experiment"


def check_experiments(job: Job, overrides: list[str]) -> None:
    """Refuse an experiment among train.py's `overrides` (after --, or one that a resumed run started
    with) that sets what the script has fixed otherwise (ProfileError)."""
    from ..launch.command_line import _started_with

    if conflict := find_conflict(job, overrides):
        folder = _started_with(conflict.experiment)
        said = f"-- resume={folder} (its start's {conflict.experiment})" if folder else f"-- {conflict.experiment}"
        raise ProfileError(conflict.renderer_line(said))


def find_conflict(job: Job, overrides: list[str], script: str | None = None) -> Conflict | None:
    """What the last experiment among `overrides` asks of the job that `job` does not give. Given the
    `script` that runs (it may have been edited), a line the file's job settings would render is
    no conflict where the script has it."""
    given = [override for override in overrides if is_experiment(override)]
    if not given:
        return None
    search = search_paths(overrides)
    alone, default = compose_train([*search, given[-1]]), compose_train(search)
    job_choices = {"cluster": job.cluster["name"], "strategy": job.strategy}
    for group, rendered in job_choices.items():
        chosen = alone.hydra.runtime.choices.get(group)
        if chosen != default.hydra.runtime.choices.get(group) and chosen != rendered:
            return Conflict(given[-1], "choice", group, chosen, rendered, f"{group}={chosen}")
    # The same cluster and strategy without the file: what the file itself sets
    without = compose_train([*search, *(f"{group}={alone.hydra.runtime.choices[group]}" for group in job_choices)])
    sizes = {"num_nodes": job.nodes, "devices": job.gpus}
    mine, other = _plain(alone.cluster), _plain(without.cluster)
    for key in sizes:
        if (value := mine.get(key)) != other.get(key) and value != sizes[key]:
            return Conflict(given[-1], "size", f"cluster.{key}", value, sizes[key], f"{JOB_SETTINGS[key]}={value}")
    paths = [path for key in RENDERED for path in _set_by_the_file(mine.get(key), other.get(key), key)]
    if script is not None:  # detect.*: which profile the renderer picks by itself, nothing of the job's
        paths = [path for path in paths if not path.startswith("detect.")]
        if paths and _renders_as(job, {path: _at(mine, path) for path in paths}, script):
            return None
    for path in paths:
        value, rendered = _at(mine, path), _at(job.cluster, path)
        if value != rendered:
            sign = "" if rendered is not _ABSENT else "+"
            return Conflict(
                given[-1], "rendered", f"cluster.{path}", value, rendered, f"{sign}cluster.{path}={shown(value)}"
            )
    return None


_ABSENT = object()


def _plain(node):
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


def _set_by_the_file(mine, other, path: str) -> list[str]:
    """The keys under `path` where the file's config (`mine`) differs from the one without it."""
    if isinstance(mine, dict):
        inner = other if isinstance(other, dict) else {}
        return [
            found
            for key, value in mine.items()
            for found in _set_by_the_file(value, inner.get(key, _ABSENT), f"{path}.{key}")
        ]
    return [] if mine == other else [path]


def _at(config: dict, path: str):
    for key in path.split("."):
        if not isinstance(config, dict) or key not in config:
            return _ABSENT
        config = config[key]
    return config


def _renders_as(job: Job, values: dict, script: str) -> bool:
    """The script that runs holds every line that these values of the profile would render (each
    differing from the job's): edited by hand to them, it gives the job what the file asks."""
    cluster = copy.deepcopy(job.cluster)
    for path, value in values.items():
        *parents, last = path.split(".")
        node = cluster
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    try:
        wanted = render(Job(cluster, job.strategy, job.launcher, job.nodes, job.gpus_per_node, job.test))
    except ProfileError:  # values the renderer refuses: no script has them
        return False
    lines = set(script.splitlines())
    return all(line in lines for line in set(wanted.splitlines()) - set(render(job).splitlines()))
