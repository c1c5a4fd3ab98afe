"""How many DataLoader worker processes each training process gets (data.num_workers: auto)."""

import os


def cpus_per_process(processes_per_node: int) -> int:
    """The CPUs one training process may use.

    In a Slurm job: the task's --cpus-per-task, which the rendered scripts take from the cluster
    profile (cluster.slurm.cpus_per_gpu), shared by the processes torchrun starts in the task.
    Elsewhere: the CPUs this process may run on, shared by the training processes of the machine.
    """
    if "SLURM_CPUS_PER_TASK" in os.environ:
        sharing = int(os.environ.get("LOCAL_WORLD_SIZE", 1)) if "TORCHELASTIC_RUN_ID" in os.environ else 1
        return max(int(os.environ["SLURM_CPUS_PER_TASK"]) // sharing, 1)
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(available // max(processes_per_node, 1), 1)


def resolve_workers(requested: int | str, per_sample: bool, processes_per_node: int = 1) -> int:
    """`auto`: none for in-memory tensors (indexing them beats shipping batches between processes);
    for data read sample by sample, every CPU of the process but the one that trains."""
    if requested != "auto":
        return int(requested)
    return cpus_per_process(processes_per_node) - 1 if per_sample else 0
