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

import re
import shlex
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import yaml

from .profiles import CONFIGS, PROJECT, ProfileError, load

LAUNCHERS = ("srun", "torchrun", "horovodrun")
MPI_LAUNCHERS = ("srun", "horovodrun")  # what can start a strategy whose ranks meet through MPI
JOB_NAME = {{ cookiecutter.project_slug | py_string }}
SIGNAL_SECONDS = 90  # warning before the time limit: enough to write a checkpoint

# scripts/<name>: (nodes, GPUs per node); None = every GPU of the node.
SCRIPTS = {"run-gpu1.sh": (1, 1), "run-gpu4.sh": (1, None), "run-gpu8.sh": (2, None)}


@dataclass
class Job:
    cluster: dict  # a loaded profile (profiles.load("cluster", name))
    strategy: str
    launcher: str = "srun"
    nodes: int = 1
    gpus_per_node: int | None = None  # None: all GPUs of a node
    test: bool = False  # the test partition and its short time limit
    train_overrides: list[str] = field(default_factory=list)
    rendered_by: str = ""  # the command that re-renders it, for the header
    configs: Path = CONFIGS  # where configs/strategy/<strategy>.yaml is read

    def __post_init__(self):
        if self.cluster.get("slurm") is None:
            raise ProfileError(f"cluster={self.cluster['name']} has no Slurm; use cluster=generic or your cluster")
        if self.launcher not in LAUNCHERS:
            raise ProfileError(f"launcher={self.launcher}: choose one of {', '.join(LAUNCHERS)}")
        if self.gpus > self.cluster["devices"]:
            raise ProfileError(
                f"gpus={self.gpus} per node, but a {self.cluster['name']} node has {self.cluster['devices']}: "
                f"use nodes=N with gpus<={self.cluster['devices']}"
            )
        if self.needs_mpi and self.launcher not in MPI_LAUNCHERS:
            raise ProfileError(
                f"strategy={self.strategy} starts its ranks through MPI: use launcher={' or '.join(MPI_LAUNCHERS)}"
            )

    @cached_property
    def needs_mpi(self) -> bool:
        """The strategy's ranks meet through MPI (`mpi: true` in its config), not a rendezvous."""
        return bool(load("strategy", self.strategy, self.configs).get("mpi"))

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
    def batch_shell_requeues(self) -> bool:
        """Only under srun does Lightning itself receive the signal and requeue."""
        return self.launcher != "srun"


def partition(job: Job) -> str | None:
    if job.test:
        if not job.slurm.get("test_partition"):
            raise ProfileError(f"cluster={job.cluster['name']} names no test_partition")
        return job.slurm["test_partition"]
    rules = job.slurm.get("partitions") or []
    for rule in rules:
        if rule.get("max_gpus") is not None and job.nodes * job.gpus > rule["max_gpus"]:
            continue
        if rule.get("max_nodes") is not None and job.nodes > rule["max_nodes"]:
            continue
        return rule["name"]
    if rules:
        raise ProfileError(f"no partition of cluster={job.cluster['name']} takes {job.nodes} x {job.gpus} GPUs")
    return None


def memory(job: Job) -> str | None:
    """--mem is per node."""
    if job.full_nodes and job.slurm.get("mem_full_node") is not None:
        return str(job.slurm["mem_full_node"])
    if job.slurm.get("mem_per_gpu"):
        amount, unit = re.fullmatch(r"(\d+)([KMGT]?)", str(job.slurm["mem_per_gpu"])).groups()
        return f"{int(amount) * job.gpus}{unit}"
    return None


def gpu_options(job: Job) -> list[tuple[str, str]]:
    kind, gpu_type = job.slurm.get("gpus", "gres"), job.slurm.get("gpu_type")
    typed = f"{gpu_type}:{job.gpus}" if gpu_type else str(job.gpus)
    gres = [f"gpu:{typed}"] if kind == "gres" else []
    options = [("gpus-per-node", typed)] if kind == "gpus-per-node" else []
    if kind not in ("gres", "gpus-per-node", "none"):
        raise ProfileError(f"cluster.slurm.gpus={kind}: use gres, gpus-per-node or none")
    scratch = (job.slurm.get("local_scratch") or {}).get("gres")
    if scratch:
        gres.append(scratch)
    return ([("gres", ",".join(gres))] if gres else []) + options


def sbatch_header(job: Job) -> list[str]:
    """#SBATCH lines in the order the clusters' own examples use."""
    options = [("job-name", JOB_NAME)]
    if job.slurm.get("account"):
        options.append(("account", job.slurm["account"]))
    if partition(job):
        options.append(("partition", partition(job)))
    options += [
        ("nodes", job.nodes),
        ("ntasks-per-node", job.tasks_per_node),
        ("cpus-per-task", job.slurm["cpus_per_gpu"] * job.processes_per_task),
    ]
    if memory(job) is not None:
        options.append(("mem", memory(job)))
    options.append(("time", job.slurm["test_time"] if job.test else job.slurm["time"]))
    options += gpu_options(job)
    signal = f"B:USR1@{SIGNAL_SECONDS}" if job.batch_shell_requeues else f"SIGUSR1@{SIGNAL_SECONDS}"
    options += [("output", "logs/%x-%j.out"), ("open-mode", "append"), ("signal", signal), ("requeue", None)]
    return [f"#SBATCH --{key}" + ("" if value is None else f"={value}") for key, value in options]


def software(job: Job) -> list[str]:
    lines = ["# Software. Module and venv scripts may read unset variables: no `set -u` meanwhile.", "set +u"]
    if job.slurm.get("modules"):
        lines.append("module purge")
        lines += [f"module use {path}" for path in job.slurm.get("module_use") or []]
        lines.append("module load " + " ".join(job.slurm["modules"]))
    if job.slurm.get("venv"):
        venv = job.slurm["venv"]
        lines += [
            f"if [[ -f {venv}/bin/activate ]]; then",
            "    # shellcheck disable=SC1091",
            f"    source {venv}/bin/activate",
            "fi",
        ]
    return [*lines, "set -u"]


def environment(job: Job) -> list[str]:
    lines = ["# Environment"]
    if job.processes_per_task == 1:
        lines.append("export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK  # CPU threads per training process")
    else:
        threads = f"$((SLURM_CPUS_PER_TASK / {job.processes_per_task}))"
        lines.append(f"export OMP_NUM_THREADS={threads}  # CPU threads per training process")
    lines += [f'export {key}="{value}"' for key, value in (job.slurm.get("env") or {}).items()]
    if not job.cluster.get("internet"):
        lines.append("export WANDB_MODE=offline  # no internet on compute nodes: `wandb sync` the run later")
    return lines


RENDEZVOUS = [
    "# Rendezvous on the first node of the allocation; the port is derived from the job id,",
    "# so that jobs sharing a node do not collide.",
    'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
    "export MASTER_ADDR=${NODES[0]}",
    "export MASTER_PORT=$((20000 + SLURM_JOB_ID % 40000))",
    "LOG_DIR=logs/$SLURM_JOB_NAME-$SLURM_JOB_ID  # one output file per rank (srun) or node (torchrun)",
    'mkdir -p "$LOG_DIR"',
]

SUMMARY = [
    'echo "Job $SLURM_JOB_ID ($SLURM_JOB_NAME), restart ${SLURM_RESTART_COUNT:-0}, $(date -Is)"',
    'echo "  nodes: ${NODES[*]}"',
    'echo "  tasks per node: ${SLURM_NTASKS_PER_NODE:-?}, CPUs per task: ${SLURM_CPUS_PER_TASK:-?},'
    ' GPUs: ${CUDA_VISIBLE_DEVICES:-${ROCR_VISIBLE_DEVICES:-none}}"',
    'echo "  rendezvous: $MASTER_ADDR:$MASTER_PORT, output: $LOG_DIR/"',
]

REQUEUE = [
    "# Slurm signals this shell before the time limit: requeue (same job id, so the same run",
    "# directory); the requeued job resumes from the last checkpoint.",
    'trap \'echo "SIGUSR1: requeueing job $SLURM_JOB_ID"; scontrol requeue "$SLURM_JOB_ID"\' USR1',
    "RESUME=()",
    "if (( ${SLURM_RESTART_COUNT:-0} > 0 )); then RESUME=(ckpt_path=last); fi",
]


def scratch_note(job: Job) -> list[str]:
    scratch = job.slurm.get("local_scratch")
    if not scratch:
        return []
    path = scratch["path"]
    return [f'echo "  node-local disk: {path} (fast reads: copy the data there, then data.root={path}/...)"']


def train_command(job: Job) -> str:
    overrides = [
        f"cluster={job.cluster['name']}",
        f"strategy={job.strategy}",
        f"cluster.num_nodes={job.nodes}",
        f"cluster.devices={job.gpus}",
        *job.train_overrides,
    ]
    resume = ' "${RESUME[@]}"' if job.batch_shell_requeues else ""
    return "train.py " + " ".join(shlex.quote(o) for o in overrides) + resume + ' "$@"'


def launch(job: Job) -> list[str]:
    python = " ".join([job.slurm["container"], "python"]) if job.slurm.get("container") else "python"
    srun = ["srun --kill-on-bad-exit=1", '--cpus-per-task="$SLURM_CPUS_PER_TASK"', *job.slurm.get("srun_args", [])]
    background = " &" if job.batch_shell_requeues else ""
    if job.launcher == "srun":
        if job.full_nodes:  # e.g. CPU binding masks that assume every GPU of the node has a task
            srun += job.slurm.get("full_node_srun_args") or []
        comment = ["# One task per GPU; a failing rank ends the others (--kill-on-bad-exit)."]
        if job.needs_mpi and job.slurm.get("mpi"):
            comment.append("# The ranks meet through MPI, which srun wires up (--mpi: the PMI of the cluster's MPI).")
            srun.append(f"--mpi={job.slurm['mpi']}")
        parts = [" ".join([*srun, '--output="$LOG_DIR/rank%t.log"', "--open-mode=append"])]
        parts.append(f"{python} {train_command(job)}")
    elif job.launcher == "torchrun":
        comment = ["# One torchrun per node, each starting a process per GPU."]
        parts = [
            " ".join([*srun, '--output="$LOG_DIR/node%n.log"', "--open-mode=append"]),
            f'{python} -m torch.distributed.run --nnodes="$SLURM_JOB_NUM_NODES" --nproc_per_node={job.gpus}',
            '--rdzv_id="$SLURM_JOB_ID" --rdzv_backend=c10d --rdzv_endpoint="$MASTER_ADDR:$MASTER_PORT"',
            train_command(job) + background,
        ]
    else:
        comment = [
            f"# horovodrun starts {job.gpus} processes on each node of the allocation.",
            "HOSTS=$(printf '%s:" + str(job.gpus) + ',\' "${NODES[@]}")',
        ]
        parts = ['horovodrun -np "$SLURM_NTASKS" -H "${HOSTS%,}"', f"{python} {train_command(job)}{background}"]
    lines = [*comment, " \\\n    ".join(parts)]
    if job.batch_shell_requeues:
        lines.append("wait $!  # launched in the background: the shell must be free to run the USR1 trap")
    return lines


def render(job: Job) -> str:
    size = f"{job.nodes} node(s) x {job.gpus} GPU(s)"
    header = [
        "#!/bin/bash",
        f"# cluster={job.cluster['name']} strategy={job.strategy} launcher={job.launcher}: {size}.",
        f"# Rendered by `{job.rendered_by}` from configs/cluster/{job.cluster['name']}.yaml:",
        "# change the profile and render again rather than editing this file.",
        "# Submit from the project directory; arguments are train.py overrides, e.g.",
        "#   sbatch THIS_SCRIPT trainer.max_epochs=100",
        *sbatch_header(job),
    ]
    sections = [
        header,
        ["set -euo pipefail", 'cd "$SLURM_SUBMIT_DIR"'],
        software(job),
        environment(job),
        RENDEZVOUS,
        SUMMARY + scratch_note(job),
        REQUEUE if job.batch_shell_requeues else [],
        launch(job),
    ]
    return "\n\n".join("\n".join(section) for section in sections if section) + "\n"


def strategy_launcher(strategy: str, configs: Path = CONFIGS) -> str:
    """The strategy's `launcher:` hint (configs/strategy/<name>.yaml), else srun."""
    return load("strategy", strategy, configs).get("launcher") or "srun"


def script_targets(project: Path = PROJECT) -> dict:
    """configs/slurm_scripts.yaml: which cluster, strategy and launcher scripts/ are for."""
    return yaml.safe_load((project / "configs" / "slurm_scripts.yaml").read_text())


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
