"""The topology guard: a Slurm allocation that does not match the Trainer stops at once."""

import pytest

from {{ cookiecutter.package_name }}.launch.errors import SetupError
from {{ cookiecutter.package_name }}.launch.topology import check_topology, tasks_per_node

SRUN_2x2 = {
    "SLURM_JOB_ID": "7",
    "SLURM_STEP_ID": "0",
    "SLURM_NTASKS": "4",
    "SLURM_NTASKS_PER_NODE": "2",  # set by --ntasks-per-node (srun's or #SBATCH's), which Lightning needs
    "SLURM_STEP_NUM_NODES": "2",
    "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
}


def test_tasks_per_node_reads_slurms_notation():
    assert tasks_per_node("4(x2)") == 4
    assert tasks_per_node("2") == 2
    assert tasks_per_node("2,1") is None


def test_a_matching_allocation_passes():
    check_topology(2, 2, "cpu", 0, SRUN_2x2)
    check_topology(8, 1, "gpu", 0, {})  # not in Slurm: nothing to check


def test_several_nodes_with_no_launcher_are_refused_at_once():
    """Lightning waited without end for the other node's processes ("MEMBER: 1/4"), which nothing starts."""
    with pytest.raises(SetupError, match=r"trainer.num_nodes=2 \(cluster.num_nodes\) with no launcher") as error:
        check_topology(2, 2, "cpu", 0, {})
    assert str(error.value).endswith("on this machine alone, cluster.num_nodes=1")
    check_topology(2, 2, "cpu", 0, {"NODE_RANK": "1", "MASTER_ADDR": "node1"})  # Lightning's own, set by hand


@pytest.mark.parametrize(
    "devices, nodes, message, fix",
    [
        (4, 2, "Slurm started 2 task(s) per node, but the Trainer expects devices=4", "#SBATCH --ntasks-per-node=4"),
        (2, 1, "runs on 2 node(s), but the Trainer expects num_nodes=1", "#SBATCH --nodes=1"),
    ],
)
def test_srun_mismatch_names_the_line_to_change(devices, nodes, message, fix):
    with pytest.raises(SetupError, match="Fix") as error:
        check_topology(devices, nodes, "cpu", 0, SRUN_2x2)
    assert message in str(error.value) and fix in str(error.value)


def test_a_total_task_count_asks_for_ntasks_per_node():
    """`srun -n 4` (no --ntasks-per-node): Lightning refused it with a RuntimeError in Hydra's error."""
    total = {name: value for name, value in SRUN_2x2.items() if name != "SLURM_NTASKS_PER_NODE"}
    with pytest.raises(SetupError, match=r"Slurm started 4 tasks by their total \(--ntasks=4, or srun -n 4\)") as error:
        check_topology(2, 2, "cpu", 0, total)
    assert "Fix: `--ntasks-per-node=2` (srun's option, or `#SBATCH --ntasks-per-node=2`)" in str(error.value)


def test_uneven_tasks_ask_for_ntasks_per_node():
    with pytest.raises(SetupError, match="--ntasks-per-node=2"):
        check_topology(2, 2, "cpu", 0, {**SRUN_2x2, "SLURM_STEP_TASKS_PER_NODE": "2,1"})


def test_torchrun_mismatch():
    env = {"SLURM_JOB_ID": "7", "TORCHELASTIC_RUN_ID": "7", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "4"}
    check_topology(2, 2, "cpu", 0, env)
    with pytest.raises(SetupError, match="--nproc_per_node=4"):
        check_topology(4, 2, "cpu", 0, env)


def test_torchrun_mismatch_outside_slurm():
    """Before: Lightning's traceback ("... does not match the world size (2)")."""
    env = {"TORCHELASTIC_RUN_ID": "7", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2"}
    check_topology(2, 1, "cpu", 0, env)
    expected = r"torchrun started 2 process\(es\) per node, but the Trainer expects devices=1\."
    with pytest.raises(SetupError, match=expected):
        check_topology(1, 1, "cpu", 0, env)
    with pytest.raises(SetupError, match="Fix: torchrun --nnodes=2 "):
        check_topology(2, 2, "cpu", 0, env)


def test_batch_shell_without_srun_would_hang():
    env = {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4", "SLURM_JOB_NAME": "train"}
    with pytest.raises(SetupError, match="without srun"):
        check_topology(2, 2, "cpu", 0, env)
    check_topology(2, 2, "cpu", 0, {**env, "SLURM_JOB_NAME": "interactive"})  # Lightning ignores Slurm there


def test_a_batch_script_of_a_total_task_count_without_srun_is_refused_with_the_fix():
    """One process in `#SBATCH --ntasks=4`'s batch shell: Lightning refused --ntasks, and the line's
    fix named a trainer.* setting."""
    env = {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4", "SLURM_JOB_NAME": "job.sh"}
    with pytest.raises(SetupError, match=r"4 tasks by their total \(--ntasks\)(?s:.*)--ntasks-per-node=<GPUs per no"):
        check_topology(1, 1, "cpu", 0, env)
    check_topology(1, 1, "cpu", 0, {**env, "SLURM_JOB_NAME": "interactive"})
    check_topology(1, 1, "cpu", 0, {**env, "SLURM_NTASKS": "1"})


def test_gpus_per_task_is_refused():
    with pytest.raises(SetupError, match="GPUs per node"):
        check_topology(4, 1, "gpu", 1, {**SRUN_2x2, "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_TASKS_PER_NODE": "4"})
