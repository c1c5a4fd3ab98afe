"""Render one sbatch script from a cluster profile, a strategy, a job size and a launcher.

Launchers (how the training processes start on the allocated nodes):
- srun: one Slurm task per GPU; Lightning reads its rank from Slurm (its native Slurm mode)
  and, on SIGUSR1 before the time limit, callbacks/requeue.py saves a checkpoint and
  requeues the job. Strategies whose ranks meet through MPI (Horovod: `mpi: true` in their
  config) get `srun --mpi=<cluster.slurm.mpi>`, as the HPC centres launch MPI programs.
- torchrun: one task per node running torchrun, which starts a process per GPU and meets
  the other nodes at a c10d rendezvous on the first node.
- horovodrun: started once by the batch shell; it reaches the nodes itself (through Slurm
  with an MPI build, else over ssh with gloo).
With the last two Slurm signals the batch shell, which requeues the job; the requeued run
resumes from the last checkpoint (`ckpt_path=last`).
"""

import shlex
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import jinja2
from omegaconf import OmegaConf

from .checks import (
    SIGNAL_SECONDS,
    SIZE,
    check_profile,
    in_double_quotes,
    is_count,
    refuse,
    seconds,
    shell_word,
    slurm_time,
    unset_safe,
)
from .profiles import CONFIGS, PROJECT, ProfileError, load

LAUNCHERS = ("srun", "torchrun", "horovodrun")
MPI_LAUNCHERS = ("srun", "horovodrun")  # what can start a strategy whose ranks meet through MPI
JOB_NAME = {{ cookiecutter.project_slug | py_string }}

# scripts/<name>: (nodes, GPUs per node); None = every GPU of the node.
SCRIPTS = {"run-gpu1.sh": (1, 1), "run-gpu4.sh": (1, None), "run-gpu8.sh": (2, None)}


@dataclass
class Job:
    cluster: dict  # a loaded profile (profiles.load("cluster", name)) or cfg.cluster
    strategy: str
    launcher: str = "srun"
    nodes: int = 1
    gpus_per_node: int | None = None  # None: all GPUs of a node
    test: bool = False  # the test partition and its short time limit
    train_overrides: list[str] = field(default_factory=list)
    rendered_by: str = ""  # the command that re-renders it, for the header
    configs: Path = CONFIGS  # where configs/strategy/<strategy>.yaml is read
    profile_settings: list[str] = field(default_factory=list)  # the cluster.KEY=VALUE it was rendered with

    def __post_init__(self):
        if OmegaConf.is_config(self.cluster):  # cfg.cluster of a composed train config
            self.cluster = OmegaConf.to_container(self.cluster, resolve=True)
        if self.cluster.get("slurm") is None:
            raise ProfileError(f"cluster={self.cluster['name']} has no Slurm; use cluster=generic or your cluster")
        check_profile(self.cluster)
        if not is_count(self.nodes):
            raise refuse("nodes", self.nodes, "a whole number of nodes from 1, e.g. nodes=2")
        if self.gpus_per_node is not None and not is_count(self.gpus_per_node):
            raise refuse("gpus", self.gpus_per_node, "GPUs per node from 1 (gpus=all or no gpus: a whole node)")
        if self.launcher not in LAUNCHERS:
            raise ProfileError(f"launcher={self.launcher}: choose one of {', '.join(LAUNCHERS)}")
        if self.launcher == "horovodrun" and not self.needs_mpi:
            raise ProfileError(
                f"launcher=horovodrun starts Horovod ranks, not strategy={self.strategy}: "
                "use strategy=horovod, or launcher=srun or torchrun"
            )
        if self.gpus > self.cluster["devices"]:
            raise ProfileError(
                f"gpus={self.gpus} per node, but a {self.cluster['name']} node has {self.cluster['devices']}: "
                f"use nodes=N with gpus<={self.cluster['devices']}"
            )
        if self.needs_mpi and self.launcher not in MPI_LAUNCHERS:
            raise ProfileError(
                f"strategy={self.strategy} starts its ranks through MPI: use launcher={' or '.join(MPI_LAUNCHERS)}"
            )
        if self.start_method not in (None, "popen"):  # each task would start its own processes (they crashed)
            raise ProfileError(
                f"strategy={self.strategy} starts its processes itself (start_method={self.start_method}, e.g. in a "
                f"notebook); in a job, {self.launcher} starts one per GPU: use strategy=ddp"
            )

    @cached_property
    def _strategy_config(self) -> dict:
        return load("strategy", self.strategy, self.configs, resolve=False)

    @property
    def needs_mpi(self) -> bool:
        """The strategy's ranks meet through MPI (`mpi: true` in its config), not a rendezvous."""
        return bool(self._strategy_config.get("mpi"))

    @property
    def start_method(self) -> str | None:
        """How Lightning starts the processes of one node (`instance.start_method`; popen: it runs this
        command again for each, or takes those a launcher started)."""
        instance = self._strategy_config.get("instance")
        return instance.get("start_method") if isinstance(instance, dict) else None  # auto: a name

    @property
    def slurm(self) -> dict:
        return self.cluster["slurm"]

    @property
    def gpus(self) -> int:
        return self.gpus_per_node or self.cluster["devices"]

    @property
    def full_nodes(self) -> bool:
        return self.gpus == self.cluster["devices"]

    @property
    def processes_per_task(self) -> int:
        return self.gpus if self.launcher == "torchrun" else 1

    @property
    def tasks_per_node(self) -> int:
        return self.gpus // self.processes_per_task

    @property
    def settings(self) -> list[str]:
        """The renderer's settings that render this job again (what the script checks its arguments with)."""
        size = [f"nodes={self.nodes}", *([f"gpus={self.gpus_per_node}"] if self.gpus_per_node else [])]
        place = [f"cluster={self.cluster['name']}", f"strategy={self.strategy}", f"launcher={self.launcher}"]
        return [*place, *size, *(["test=true"] if self.test else []), *self.profile_settings]

    @property
    def batch_shell_requeues(self) -> bool:
        """Only under srun does Lightning itself receive the signal and requeue."""
        return self.launcher != "srun"


def partition(job: Job) -> str | None:
    if job.test:
        if not job.slurm.get("test_partition"):
            raise ProfileError(
                f"test=true: cluster={job.cluster['name']} has no test partition; "
                "leave test out or name one with cluster.slurm.test_partition=NAME"
            )
        limit = job.slurm.get("test_max_nodes")
        if limit is not None and job.nodes > limit:
            raise ProfileError(
                f"nodes={job.nodes} with test=true: the test partition of cluster={job.cluster['name']} "
                f"({job.slurm['test_partition']}) takes at most {limit} node(s). Fix: nodes={limit}, or leave test out"
            )
        return job.slurm["test_partition"]
    rules = job.slurm.get("partitions") or []
    if job.slurm.get("partition"):  # named: its limits, where the profile knows them (else sbatch judges)
        rule = next((rule for rule in rules if rule["name"] == job.slurm["partition"]), {})
        if not fits(rule, job):  # sbatch refuses it, or it waits for ever
            limits = ", ".join(f"{rule[key]} {what}" for key, what in LIMITS.items() if rule.get(key) is not None)
            raise ProfileError(
                f"nodes={job.nodes} x gpus={job.gpus}: partition {rule['name']} of cluster={job.cluster['name']} takes "
                f"at most {limits} (configs/cluster/{job.cluster['name']}.yaml). Fix: a job within those, or leave "
                "out cluster.slurm.partition to have the partition picked by the job's size"
            )
        check_time_fits(job, rule)
        return job.slurm["partition"]
    sized = [rule for rule in rules if fits(rule, job)]
    for rule in sized:
        if not too_long(job, rule):
            return rule["name"]
    if sized:  # each partition that takes the job's size has a shorter time limit: name the longest
        check_time_fits(job, max(sized, key=lambda rule: seconds(rule["max_time"])))
    if rules:
        most = max((rule["max_nodes"] for rule in rules if rule.get("max_nodes")), default=job.nodes)
        fewer = f" (at most {most} nodes). Fix: nodes={most} or fewer" if job.nodes > most else ". Fix: fewer GPUs"
        raise ProfileError(
            f"nodes={job.nodes}: no partition of cluster={job.cluster['name']} takes {job.nodes} x {job.gpus} GPUs"
            f"{fewer}, or cluster.slurm.partition=NAME"
        )
    return None


def too_long(job: Job, rule: dict) -> bool:
    return rule.get("max_time") is not None and seconds(job.slurm["time"]) > seconds(rule["max_time"])


def check_time_fits(job: Job, rule: dict) -> None:
    """A time beyond the partition's limit: sbatch refuses the job, or, where the cluster lets
    such jobs wait, it waits forever (PartitionTimeLimit)."""
    if too_long(job, rule):
        limit = rule["max_time"]
        raise ProfileError(
            f"cluster.slurm.time={job.slurm['time']}: partition {rule['name']} of cluster={job.cluster['name']} takes "
            f"at most {limit} (configs/cluster/{job.cluster['name']}.yaml). Fix: cluster.slurm.time="
            f"{slurm_time(seconds(limit))} or less: at its limit the job saves, requeues itself and resumes"
        )


LIMITS = {"max_nodes": "node(s)", "max_gpus_per_node": "GPUs per node", "max_gpus": "GPUs in all"}  # and max_time


def fits(rule: dict, job: Job) -> bool:
    """A partition rule's limits: max_gpus (in all), max_gpus_per_node, max_nodes."""
    limits = {"max_gpus": job.nodes * job.gpus, "max_gpus_per_node": job.gpus, "max_nodes": job.nodes}
    return all(rule.get(key) is None or value <= rule[key] for key, value in limits.items())


def memory(job: Job) -> str | None:
    """--mem is per node."""
    if job.full_nodes and job.slurm.get("mem_full_node") is not None:
        return str(job.slurm["mem_full_node"])
    if job.slurm.get("mem_per_gpu"):
        amount, unit = SIZE.fullmatch(str(job.slurm["mem_per_gpu"])).groups()
        return f"{int(amount) * job.gpus}{unit}"
    return None


def gpu_options(job: Job) -> dict[str, str]:
    kind, gpu_type = job.slurm.get("gpus", "gres"), job.slurm.get("gpu_type")
    typed = f"{gpu_type}:{job.gpus}" if gpu_type else str(job.gpus)
    gres = [f"gpu:{typed}"] if kind == "gres" else []
    scratch = (job.slurm.get("local_scratch") or {}).get("gres")
    if scratch:
        gres.append(scratch)
    return ({"gres": ",".join(gres)} if gres else {}) | ({"gpus-per-node": typed} if kind == "gpus-per-node" else {})


def sbatch_options(job: Job) -> dict[str, object]:
    """#SBATCH options in the order the clusters' own examples use (None: a flag)."""
    options = {"job-name": JOB_NAME, "account": job.slurm.get("account") or None, "partition": partition(job)}
    options = {key: value for key, value in options.items() if value is not None}
    options |= {
        "nodes": job.nodes,
        "ntasks-per-node": job.tasks_per_node,
        "cpus-per-task": job.slurm["cpus_per_gpu"] * job.processes_per_task,
    }
    if memory(job) is not None:
        options["mem"] = memory(job)
    options["time"] = job.slurm["test_time"] if job.test else job.slurm["time"]
    options |= gpu_options(job)
    options |= job.slurm.get("sbatch") or {}  # the profile's extras (checks.py: none of the above)
    signal = f"B:USR1@{SIGNAL_SECONDS}" if job.batch_shell_requeues else f"SIGUSR1@{SIGNAL_SECONDS}"
    return options | {"output": "logs/%x-%j.out", "open-mode": "append", "signal": signal, "requeue": None}


def sbatch_header(job: Job) -> list[str]:
    return [f"#SBATCH --{key}" + ("" if value is None else f"={value}") for key, value in sbatch_options(job).items()]


def srun_options(job: Job) -> list[str]:
    """srun's options for the launch: the profile's extras, CPU binding and MPI where they apply."""
    options = ['--cpus-per-task="$SLURM_CPUS_PER_TASK"', *map(shell_word, job.slurm.get("srun_args") or [])]
    if job.launcher == "srun" and job.full_nodes:  # e.g. CPU binding masks that assume every GPU has a task
        options += map(shell_word, job.slurm.get("full_node_srun_args") or [])
    if job.launcher == "srun" and job.needs_mpi and job.slurm.get("mpi"):
        options.append(f"--mpi={job.slurm['mpi']}")
    return options


def train_arguments(job: Job) -> list[str]:
    """What the script gives train.py: the job's cluster, strategy and size, then the user's overrides."""
    place = [f"cluster={job.cluster['name']}", f"strategy={job.strategy}"]
    return [*place, f"cluster.num_nodes={job.nodes}", f"cluster.devices={job.gpus}", *job.train_overrides]


def template_values(job: Job) -> dict:
    """What job.sh.j2 is filled with: every profile value checked (Job) and quoted here."""
    slurm, scratch, settings = job.slurm, job.slurm.get("local_scratch") or {}, job.settings
    per_process = "" if job.processes_per_task == 1 else f" / {job.processes_per_task}"
    return {
        "cluster": job.cluster["name"],
        "strategy": job.strategy,
        "launcher": job.launcher,
        "nodes": job.nodes,
        "gpus": job.gpus,
        "rendered_by": job.rendered_by,
        "sbatch": sbatch_options(job),
        "module_use": [shell_word(path) for path in slurm.get("module_use") or []],
        "modules": [shell_word(module) for module in slurm.get("modules") or []],
        "venv": shell_word(slurm["venv"]) if slurm.get("venv") else None,
        "threads": f"$((SLURM_CPUS_PER_TASK{per_process}))" if per_process else "$SLURM_CPUS_PER_TASK",
        "env": {name: in_double_quotes(value) for name, value in (slurm.get("env") or {}).items()},
        "offline": not job.cluster.get("internet"),
        "scratch": unset_safe(in_double_quotes(scratch["path"])) if scratch.get("path") else None,
        "mpi": job.needs_mpi and bool(slurm.get("mpi")),
        "srun": " ".join(["srun --kill-on-bad-exit=1", *srun_options(job)]),
        "python": " ".join([*map(shell_word, shlex.split(slurm.get("container") or "")), "python"]),
        "package": __package__.partition(".")[0],  # its torchrun module: an honest exit code on a signal
        "train_overrides": " ".join(shlex.quote(override) for override in train_arguments(job)),
        # the job's settings, then its overrides (without the settings' own cluster.KEY=VALUE that train)
        "checked_with": shlex.join(
            [*settings, "--", *(override for override in job.train_overrides if override not in settings)]
        ),
    }


TEMPLATE = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent),
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
).get_template("job.sh.j2")


def render(job: Job) -> str:
    return TEMPLATE.render(template_values(job))


def job_options(
    cluster: dict,
    nodes: int = 1,
    gpus_per_node: int | None = None,
    strategy: str = "ddp",
    launcher: str | None = None,
    test: bool = False,
) -> dict:
    """What a rendered script asks Slurm for, for launchers that write their own sbatch script
    (Hydra's submitit launcher): `sbatch` = the #SBATCH options (None: a flag), `setup` = the
    script's software and environment lines, `srun` = srun's options, `train_overrides` =
    what train.py is given. `cluster`: a loaded profile or cfg.cluster. Bad values: ProfileError."""
    job = Job(cluster, strategy, launcher or strategy_launcher(strategy), nodes, gpus_per_node, test)
    values = template_values(job)
    setup = "".join(TEMPLATE.blocks["setup"](TEMPLATE.new_context(values)))
    return {
        "sbatch": values["sbatch"],
        "setup": setup.splitlines(),
        "srun": srun_options(job),
        "train_overrides": shlex.split(values["train_overrides"]),
    }


def strategy_launcher(strategy: str, configs: Path = CONFIGS) -> str:
    """The strategy's `launcher:` hint (configs/strategy/<name>.yaml), else srun."""
    return load("strategy", strategy, configs, resolve=False).get("launcher") or "srun"


def script_targets(project: Path = PROJECT) -> dict:
    """configs/slurm_scripts.yaml: which cluster, strategy and launcher scripts/ are for."""
    return OmegaConf.to_container(OmegaConf.load(project / "configs" / "slurm_scripts.yaml"))


def default_scripts(project: Path = PROJECT) -> dict[str, str]:
    """scripts/run-gpu{1,4,8}.sh as they should read: file name -> text."""
    configs = project / "configs"
    targets = script_targets(project)
    cluster = load("cluster", targets["cluster"], configs)
    launcher = targets.get("launcher") or strategy_launcher(targets["strategy"], configs)
    scripts = {}
    for name, (nodes, gpus) in SCRIPTS.items():
        job = Job(
            cluster,
            targets["strategy"],
            launcher,
            nodes,
            gpus,
            rendered_by=f"python -m {__package__} --write-scripts",
            configs=configs,
        )
        scripts[name] = render(job).replace("THIS_SCRIPT", f"scripts/{name}")
    return scripts


def write_scripts(project: Path = PROJECT) -> list[Path]:
    (project / "scripts").mkdir(exist_ok=True)
    paths = []
    for name, text in default_scripts(project).items():
        path = project / "scripts" / name
        path.write_text(text)
        path.chmod(0o755)
        paths.append(path)
    return paths
