"""The rendered sbatch scripts on a real Slurm (tests/slurm/start-local-slurm.sh): 2 nodes,
DDP over gloo and Horovod over MPI on CPUs, 4 ranks at most. Job times are printed (pytest -s)
for the README."""

import pytest
import torch

from {{ cookiecutter.package_name }}.slurm.profiles import choices, load
from {{ cookiecutter.package_name }}.slurm.render import LAUNCHERS, MPI_LAUNCHERS, SCRIPTS, Job, render

from tests.helpers import FAST, assert_same_weights, recorded, require_horovod
from tests.slurm_helpers import write_script

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

RECORD = ["+callbacks.record._target_=tests.helpers.RecordRanks"]


def check_ddp_run(finished, outputs, record, world_size):
    """A data-parallel job (DDP, Horovod) finished with every rank in step, in one run directory."""
    assert finished.state == "COMPLETED", f"job {finished.job_id} ended {finished.state}:\n{finished.log}"
    weights, writes = recorded(record)
    assert_same_weights(weights, world_size=world_size)
    assert all(w["world_size"] == world_size for w in weights)
    run_dirs = list(outputs.iterdir())
    assert [d.name for d in run_dirs] == [f"slurm-{finished.job_id}"], "ranks disagreed on the run directory"
    assert (run_dirs[0] / "checkpoints" / "last.ckpt").exists()
    assert set(writes) == {0}, f"only rank 0 may write checkpoints, got writes from ranks {sorted(writes)}"


def start_slow_job(local_slurm, tmp_path, launcher):
    """Submit a 2-node job of 12 short epochs that records where each start began; return
    once it has written its first checkpoint, so that it can be signalled mid-training."""
    script = write_script(tmp_path, nodes=2, launcher=launcher)
    job_id = local_slurm.submit(
        script,
        *FAST,
        "trainer.max_epochs=12",
        f"output_root={tmp_path / 'outputs'}",
        *RECORD,
        f"+callbacks.record.path={tmp_path / 'record'}",
        "+callbacks.starts._target_=tests.slurm_helpers.RecordStarts",
        f"+callbacks.starts.path={tmp_path / 'starts'}",
        "+callbacks.starts.seconds_per_step=0.25",  # 12 epochs x 2 steps: ~6 s of training
    )
    first_checkpoint = tmp_path / "outputs" / f"slurm-{job_id}" / "checkpoints" / "last.ckpt"
    local_slurm.wait_for(first_checkpoint.exists, f"job {job_id} wrote no checkpoint", timeout=300)
    return script, job_id


@pytest.mark.parametrize("launcher", ["srun", "torchrun"])
def test_two_nodes_train_in_step(local_slurm, launcher, tmp_path):
    """srun: 2 nodes x 2 tasks; torchrun: 2 nodes x 1 task starting 2 processes each."""
    script = write_script(tmp_path, launcher=launcher, nodes=2)
    finished = local_slurm.run(
        script, *FAST, f"output_root={tmp_path / 'outputs'}", *RECORD, f"+callbacks.record.path={tmp_path / 'record'}"
    )
    print(f"\n{launcher}, 2 nodes x 2 ranks: job {finished.job_id} took {finished.seconds:.1f} s")
    check_ddp_run(finished, tmp_path / "outputs", tmp_path / "record", world_size=4)
    assert f"Job {finished.job_id} (" in finished.log, "the script prints a summary of the allocation"


@pytest.mark.parametrize("launcher", MPI_LAUNCHERS)
def test_horovod_job_trains_in_step_over_mpi(local_slurm, launcher, tmp_path):
    """2 nodes x 1 task. srun (the default, as the HPC centres run Horovod): a task per GPU, MPI
    from `--mpi=pmix` of the cluster profile, no ssh. horovodrun: Open MPI's mpirun in the batch
    shell reaches the nodes through Slurm."""
    require_horovod(mpi=True)
    script = write_script(tmp_path, strategy="horovod", launcher=launcher, nodes=2, gpus_per_node=1)
    assert ("--mpi=pmix" in script.read_text()) == (launcher == "srun")
    finished = local_slurm.run(
        script, *FAST, f"output_root={tmp_path / 'outputs'}", *RECORD, f"+callbacks.record.path={tmp_path / 'record'}"
    )
    print(f"\nhorovod, {launcher}, 2 nodes x 1 rank: job {finished.job_id} took {finished.seconds:.1f} s")
    check_ddp_run(finished, tmp_path / "outputs", tmp_path / "record", world_size=2)


def test_preempted_job_checkpoints_requeues_and_resumes(local_slurm, tmp_path):
    """SIGUSR1 (what --signal=SIGUSR1@90 sends before the time limit) -> the ranks save an hpc
    checkpoint and requeue the job -> the same job id runs again, resumes from it and finishes."""
    outputs, starts, record = tmp_path / "outputs", tmp_path / "starts", tmp_path / "record"
    script, job_id = start_slow_job(local_slurm, tmp_path, launcher="srun")
    local_slurm.command("scancel", "--signal=USR1", job_id)  # at once (Slurm sends --signal@ within ~30 s)
    local_slurm.release_requeued(job_id)
    info = local_slurm.wait(job_id, timeout=600)
    log = local_slurm.log(script, job_id)
    print(f"\npreemption: job {job_id} requeued and finished, {log.count('Job ' + job_id + ' (')} starts")
    assert info["JobState"] == "COMPLETED", f"job {job_id} ended {info['JobState']}:\n{log}"

    hpc = sorted((outputs / f"slurm-{job_id}").glob("hpc_ckpt_*.ckpt"))
    assert hpc, f"no hpc checkpoint:\n{log}"
    saved = torch.load(hpc[-1], weights_only=False)
    assert 0 < saved["global_step"] < 12 * 2
    first, second = [tuple(map(int, line.split())) for line in (starts / "starts-rank0.txt").read_text().splitlines()]
    assert first == (0, 0)
    # Resumed at the saved step; a checkpoint taken after an epoch's last batch (2 steps per
    # epoch here) continues with the next epoch.
    epoch_done = saved["global_step"] % 2 == 0
    resumed_at = (saved["epoch"] + epoch_done, saved["global_step"])
    assert second == resumed_at, "the requeued run did not start where the hpc checkpoint was saved"
    assert "Restoring states from the checkpoint path" in log
    # Finished all 12 epochs (256 samples in batches of 32 over 4 ranks: 2 steps each), in step.
    weights, _ = recorded(record)
    assert_same_weights(weights, world_size=4)
    assert {w["global_step"] for w in weights} == {12 * 2}


def test_torchrun_job_is_requeued_by_its_batch_shell(local_slurm, tmp_path):
    """Under torchrun the batch shell gets the signal (--signal=B:USR1@90), requeues the job,
    and the requeued run resumes from last.ckpt instead of starting again from zero."""
    starts, record = tmp_path / "starts", tmp_path / "record"
    script, job_id = start_slow_job(local_slurm, tmp_path, launcher="torchrun")
    local_slurm.command("scancel", "--batch", "--signal=USR1", job_id)
    local_slurm.release_requeued(job_id)
    info = local_slurm.wait(job_id, timeout=600)
    log = local_slurm.log(script, job_id)
    assert info["JobState"] == "COMPLETED", f"job {job_id} ended {info['JobState']}:\n{log}"
    assert f"SIGUSR1: requeueing job {job_id}" in log

    first, second = [tuple(map(int, line.split())) for line in (starts / "starts-rank0.txt").read_text().splitlines()]
    assert first == (0, 0)
    assert second[0] >= 1 and second[1] >= 2, f"the requeued run started at epoch/step {second}, not from last.ckpt"
    weights, _ = recorded(record)
    assert_same_weights(weights, world_size=4)
    assert {w["global_step"] for w in weights} == {12 * 2}


def test_mismatched_allocation_fails_fast_with_the_fix(local_slurm, tmp_path):
    """One task per node where the Trainer expects two: stop with the #SBATCH line to change."""
    script = write_script(tmp_path, nodes=2)
    finished = local_slurm.run(
        script, *FAST, f"output_root={tmp_path / 'outputs'}", sbatch_options=("--ntasks-per-node=1",), timeout=300
    )
    print(f"\nmismatch: job {finished.job_id} failed after {finished.seconds:.1f} s")
    assert finished.state == "FAILED", finished.log
    assert "Slurm started 1 task(s) per node, but the Trainer expects devices=2" in finished.log
    assert "#SBATCH --ntasks-per-node=2" in finished.log
    assert "Traceback" not in finished.log


def rendered_scripts():
    """Every cluster profile x launcher x size of scripts/ (these include scripts/ itself)."""
    for cluster in choices("cluster"):
        profile = load("cluster", cluster)
        if profile.get("slurm") is not None:
            for launcher in LAUNCHERS:
                strategy = "horovod" if launcher == "horovodrun" else "ddp"  # horovodrun starts only Horovod
                for name, (nodes, gpus) in SCRIPTS.items():
                    yield f"{cluster}-{launcher}-{name}", Job(profile, strategy, launcher, nodes, gpus)


def test_every_profile_is_accepted_by_sbatch(local_slurm, tmp_path):
    """sbatch --test-only judges every line, except those naming the real cluster's partitions
    and GPU types: those are replaced on the command line with the local Slurm's."""
    rejected = []
    for name, job in rendered_scripts():
        path = tmp_path / name
        path.write_text(render(job))
        options = [f"--partition={local_slurm.partition}"]
        if job.slurm.get("gpus") == "gpus-per-node":
            options.append(f"--gpus-per-node={job.gpus}")
        else:
            options.append(f"--gres=gpu:{job.gpus}")
        result = local_slurm.command("sbatch", "--test-only", *options, str(path), check=False)
        if result.returncode != 0:
            rejected.append(f"{name}: {result.stderr.strip()}")
    assert not rejected, "\n".join(rejected)


def test_sbatch_test_only_can_fail(local_slurm, tmp_path):
    """The check above means something: a request the local nodes cannot meet is rejected."""
    path = write_script(tmp_path, nodes=1)
    result = local_slurm.command("sbatch", "--test-only", "--gres=gpu:99", str(path), check=False)
    assert result.returncode != 0
