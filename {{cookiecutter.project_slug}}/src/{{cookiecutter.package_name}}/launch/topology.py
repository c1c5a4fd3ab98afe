"""Does the Slurm allocation (or torchrun's processes) match what the Trainer expects? Checked
before training starts.

A mismatch otherwise hangs: Lightning waits at "Initializing distributed" for ranks that
were never started (or starts more than the allocation holds). Each message names the
`#SBATCH` line or the override to change.
"""

import os
import re
from collections.abc import Mapping

from .environment import RANK_VARIABLES
from .errors import SetupError

# Set where something starts a node's processes: a launcher's rank (torchrun, srun, MPI, horovodrun),
# a Slurm job or an LSF one, or by hand for Lightning's own environment (NODE_RANK and MASTER_ADDR).
LAUNCHED = (*RANK_VARIABLES, "SLURM_JOB_ID", "LSB_JOBID", "NODE_RANK", "MASTER_ADDR")


def tasks_per_node(value: str) -> int | None:
    """Slurm's SLURM_STEP_TASKS_PER_NODE, e.g. "4(x2)" or "2,1": the count if it is the same on every node."""
    counts = {int(match.group(1)) for match in re.finditer(r"(\d+)(?:\(x\d+\))?", value)}
    return counts.pop() if len(counts) == 1 else None


def check_topology(
    devices, num_nodes, accelerator: str, visible_gpus: int, env: Mapping[str, str] = os.environ
) -> None:
    """devices/num_nodes: the Trainer's; visible_gpus: torch.cuda.device_count() in this process."""
    if "TORCHELASTIC_RUN_ID" in env and "SLURM_JOB_ID" not in env and isinstance(devices, int):
        _check_torchrun(devices, num_nodes, env)  # torchrun outside Slurm (Lightning's traceback before)
    if isinstance(num_nodes, int) and num_nodes > 1 and not any(name in env for name in LAUNCHED):
        raise SetupError(
            f"trainer.num_nodes={num_nodes} (cluster.num_nodes) with no launcher: nothing starts the processes of "
            "the other nodes, and Lightning would wait for them without end. Fix: on a Slurm cluster, "
            "sbatch scripts/run-gpu8.sh (or srun); elsewhere torchrun --nnodes on each node (or NODE_RANK, "
            "MASTER_ADDR and MASTER_PORT set there); on this machine alone, cluster.num_nodes=1"
        )
    if "SLURM_JOB_ID" not in env or not isinstance(devices, int):
        return  # not in a Slurm job, or devices given as a list / "auto": nothing to compare
    if "HOROVOD_RANK" in env or "OMPI_COMM_WORLD_SIZE" in env:
        return  # started by horovodrun / mpirun: Slurm's task counts describe their daemons, not the ranks
    interactive = env.get("SLURM_JOB_NAME") in ("bash", "interactive")  # salloc's shell: Lightning ignores Slurm
    if "TORCHELASTIC_RUN_ID" in env:
        _check_torchrun(devices, num_nodes, env)
    elif "SLURM_STEP_ID" in env:
        _check_srun(devices, num_nodes, env)
    elif devices * num_nodes > 1 and "SLURM_NTASKS" in env and not interactive:
        # In the batch shell itself: Lightning would take the job's task count as its world
        # size and wait for tasks that nobody starts.
        raise SetupError(
            f"train.py runs in the batch script of job {env['SLURM_JOB_ID']} without srun, so only this one "
            f"process exists, but the Trainer expects {devices * num_nodes}.\n"
            "Fix: start it with `srun python train.py ...` (see scripts/run-gpu*.sh)."
        )
    elif int(env.get("SLURM_NTASKS", "1")) > 1 and "SLURM_NTASKS_PER_NODE" not in env and not interactive:
        # One process in the batch shell: Lightning's error named a --ntasks-per-node and a trainer setting.
        raise SetupError(
            f"Slurm job {env['SLURM_JOB_ID']} has {env['SLURM_NTASKS']} tasks by their total (--ntasks), which "
            "Lightning refuses, and train.py runs in its batch script without srun.\n"
            "Fix: `#SBATCH --ntasks-per-node=<GPUs per node>` instead of `--ntasks` (cluster.devices the same), and "
            "`srun python train.py ...` (see scripts/run-gpu*.sh)."
        )
    if accelerator in ("gpu", "cuda") and 0 < visible_gpus < devices:
        raise SetupError(
            f"This process sees {visible_gpus} GPU(s), but cluster.devices={devices}: every task must see all "
            "GPUs of its node.\n"
            f"Fix: ask for GPUs per node (`#SBATCH --gres=gpu:{devices}` or `--gpus-per-node={devices}`), "
            "not per task (`--gpus-per-task`), or set cluster.devices to the GPUs you ask for."
        )


def _check_srun(devices: int, num_nodes: int, env: Mapping[str, str]) -> None:
    nodes = int(env.get("SLURM_STEP_NUM_NODES", env.get("SLURM_NNODES", "1")))
    per_node = tasks_per_node(env.get("SLURM_STEP_TASKS_PER_NODE", env.get("SLURM_TASKS_PER_NODE", "1")))
    if per_node is None:
        raise SetupError(
            f"Slurm started an uneven number of tasks per node ({env.get('SLURM_STEP_TASKS_PER_NODE')}), "
            "but Lightning needs the same number on every node.\n"
            f"Fix: `#SBATCH --ntasks-per-node={devices}` instead of `--ntasks`."
        )
    tasks = int(env.get("SLURM_NTASKS", "1"))
    if tasks > 1 and "SLURM_NTASKS_PER_NODE" not in env:  # Lightning's own check: a Hydra error of many lines
        raise SetupError(
            f"Slurm started {tasks} tasks by their total (--ntasks={tasks}, or srun -n {tasks}), which Lightning "
            "refuses: it needs the number per node.\n"
            f"Fix: `--ntasks-per-node={devices}` (srun's option, or `#SBATCH --ntasks-per-node={devices}`) instead of "
            "`--ntasks`."
        )
    if per_node != devices:
        raise SetupError(
            f"Slurm started {per_node} task(s) per node, but the Trainer expects devices={devices} per node.\n"
            f"Fix: `#SBATCH --ntasks-per-node={devices}` (one task per GPU), or the override "
            f"cluster.devices={per_node}."
        )
    if nodes != num_nodes:
        raise SetupError(
            f"The job step runs on {nodes} node(s), but the Trainer expects num_nodes={num_nodes}.\n"
            f"Fix: `#SBATCH --nodes={num_nodes}`, or the override cluster.num_nodes={nodes}."
        )


def _check_torchrun(devices: int, num_nodes: int, env: Mapping[str, str]) -> None:
    per_node = int(env["LOCAL_WORLD_SIZE"])
    nodes = int(env["WORLD_SIZE"]) // per_node
    if per_node != devices:
        raise SetupError(
            f"torchrun started {per_node} process(es) per node, but the Trainer expects devices={devices}.\n"
            f"Fix: torchrun --nproc_per_node={devices}, or the override cluster.devices={per_node}."
        )
    if nodes != num_nodes:
        raise SetupError(
            f"torchrun runs on {nodes} node(s), but the Trainer expects num_nodes={num_nodes}.\n"
            f"Fix: torchrun --nnodes={num_nodes} (in a Slurm job: `#SBATCH --nodes={num_nodes}`, which it follows), "
            f"or cluster.num_nodes={nodes}."
        )
