"""The rendered sbatch scripts on a real Slurm (tests/slurm/start-local-slurm.sh): 2 nodes,
DDP over gloo and Horovod over MPI on CPUs, 4 ranks at most. Job times are printed (pytest -s)
for the README."""

import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import torch

from {{ cookiecutter.package_name }}.callbacks.checkpoints import checkpoint_step, newest_checkpoint
from {{ cookiecutter.package_name }}.slurm.profiles import choices, load
from {{ cookiecutter.package_name }}.slurm.render import LAUNCHERS, MPI_LAUNCHERS, SCRIPTS, Job, render

from tests.helpers import (
    CPU_DEEPSPEED,
    FAST,
    PROJECT,
    assert_same_weights,
    record_saves,
    record_validations,
    recorded,
    require_horovod,
    run_train,
    step_of,
)
from tests.sharded import parameters_only
from tests.slurm_helpers import record_starts, starts_of, write_script

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


def start_slow_job(
    local_slurm, tmp_path, launcher, epochs=12, *overrides, strategy="ddp", recorder=RECORD, sbatch_options=(), **job
):
    """Submit a 2-node job of short epochs (2 steps each) that records where each start began;
    return once it has written its first checkpoint, so that it can be signalled mid-training.
    `job`: more of the script's settings (write_script), e.g. gpus_per_node."""
    script = write_script(tmp_path, nodes=2, launcher=launcher, strategy=strategy, **job)
    job_id = local_slurm.submit(
        script,
        *FAST,
        f"trainer.max_epochs={epochs}",
        *overrides,
        f"output_root={tmp_path / 'outputs'}",
        *recorder,
        f"+callbacks.record.path={tmp_path / 'record'}",
        *record_starts(tmp_path / "starts", seconds_per_step=0.25),  # 12 epochs x 2 steps: ~6 s of training
        sbatch_options=sbatch_options,
    )
    first_checkpoint = tmp_path / "outputs" / f"slurm-{job_id}" / "checkpoints" / "last.ckpt"
    local_slurm.wait_for(first_checkpoint.exists, f"job {job_id} wrote no checkpoint", timeout=300)
    return script, job_id


def preempt_to_the_end(local_slurm, script, job_id, outputs: Path) -> tuple[str, Path]:
    """SIGUSR1 to every rank (what --signal=SIGUSR1@90 sends before the time limit; here at once,
    where Slurm would send it within ~30 s of that moment), then the requeued job run to its end.
    Returns the job's log and the one hpc checkpoint the ranks saved (in outputs/slurm-<job>)."""
    local_slurm.command("scancel", "--signal=USR1", job_id)
    local_slurm.release_requeued(job_id)
    info = local_slurm.wait(job_id, timeout=900)
    log = local_slurm.log(script, job_id)
    assert info["JobState"] == "COMPLETED", f"job {job_id} ended {info['JobState']}:\n{log}"
    hpc = list((outputs / f"slurm-{job_id}").glob("hpc_ckpt_*.ckpt"))
    assert len(hpc) == 1, f"hpc checkpoints: {hpc}\n{log}"
    return log, hpc[0]


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
    if launcher == "horovodrun" and os.environ.get("OMPI_MCA_plm") == "isolated":
        pytest.skip("this machine sets OMPI_MCA_plm=isolated: Open MPI's mpirun starts ranks on this node only")
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
    script, job_id = start_slow_job(local_slurm, tmp_path, launcher="srun")
    log, hpc = preempt_to_the_end(local_slurm, script, job_id, tmp_path / "outputs")
    print(f"\npreemption: job {job_id} requeued and finished, {log.count('Job ' + job_id + ' (')} starts")
    saved = torch.load(hpc, weights_only=False)
    assert 0 < saved["global_step"] < 12 * 2
    starts, record = tmp_path / "starts", tmp_path / "record"
    first, second = starts_of(starts)
    assert first == (0, 0)
    # Resumed at the saved step, in the saved epoch: a save after an epoch's last batch (2 steps
    # per epoch here) or during its validation resumes with that epoch's validation.
    assert second == (saved["epoch"], saved["global_step"]), "the requeued run did not start where it was saved"
    assert "Restoring states from the checkpoint path" in log
    # Finished all 12 epochs (256 samples in batches of 32 over 4 ranks: 2 steps each), in step.
    weights, _ = recorded(record)
    assert_same_weights(weights, world_size=4)
    assert {w["global_step"] for w in weights} == {12 * 2}


def test_a_preempted_job_that_slurm_will_not_requeue_fails_with_the_command_that_resumes_it(local_slurm, tmp_path):
    """A job of --no-requeue (or on a site without requeues): the ranks saved, `scontrol requeue` was
    refused, and they exited 0: the job read COMPLETED with its training unfinished. Now rank 0
    says so with the command that resumes it, and the job fails."""
    script, job_id = start_slow_job(local_slurm, tmp_path, "srun", sbatch_options=("--no-requeue",))
    local_slurm.command("scancel", "--signal=USR1", job_id)
    info = local_slurm.wait(job_id, timeout=300)
    log = local_slurm.log(script, job_id)
    assert (info["JobState"], info["ExitCode"]) == ("FAILED", "1:0"), f"job {job_id} ended {info}:\n{log}"
    run = tmp_path / "outputs" / f"slurm-{job_id}"
    (hpc,) = run.glob("hpc_ckpt_*.ckpt")
    line = next(line for line in log.splitlines() if line.startswith("SIGUSR1: the job was not requeued ("))
    assert line.endswith(f"): saved {hpc}. Resume: sbatch {script} resume={run}"), line
    assert 0 < step_of(hpc) < 12 * 2 and "Traceback" not in log


@pytest.mark.parametrize("strategy", ["deepspeed", "fsdp2"])
def test_a_preempted_sharded_job_requeues_and_resumes_from_every_ranks_shards(
    local_slurm, tmp_path, monkeypatch, strategy
):
    """ZeRO and FSDP2 on 2 nodes x 2 ranks (CPUs): the requeue's hpc checkpoint is a folder that
    every rank wrote its shards into; the requeued job resumes from it and finishes, in step."""
    if strategy == "deepspeed":
        pytest.importorskip("deepspeed", reason="bash tools/setup-deepspeed-horovod.sh installs it")
        monkeypatch.setenv("DS_ACCELERATOR", "cpu")  # the job's environment is sbatch's (tests/cpu_deepspeed.py)
        overrides, recorder = CPU_DEEPSPEED, RECORD
    else:  # FSDP2's parameters are shards: the recorder gathers them
        overrides, recorder = [], ["+callbacks.record._target_=tests.sharded.RecordFullWeights"]
    script, job_id = start_slow_job(local_slurm, tmp_path, "srun", 12, *overrides, strategy=strategy, recorder=recorder)
    _log, hpc = preempt_to_the_end(local_slurm, script, job_id, tmp_path / "outputs")
    assert hpc.is_dir(), "not a folder of shards"
    saved = checkpoint_step(hpc)
    assert 0 < saved < 12 * 2
    first, second = starts_of(tmp_path / "starts")
    assert first == (0, 0) and second[1] == saved, "the requeued run did not start where it was saved"
    weights, _ = recorded(tmp_path / "record")
    assert_same_weights(parameters_only(weights), world_size=4)  # BatchNorm statistics stay per rank
    assert {w["global_step"] for w in weights} == {12 * 2}


def test_a_requeue_during_a_validation_resumes_with_that_whole_validation(local_slurm, tmp_path):
    """SIGUSR1 during a validation (which can outlast the 90 s before the time limit): the ranks
    save and requeue at a validation batch's end, not after the validation, and the requeued
    run validates that epoch again from its start before it trains on."""
    validations, starts = tmp_path / "validations.txt", tmp_path / "starts"
    script = write_script(tmp_path, nodes=2, launcher="srun")
    job_id = local_slurm.submit(
        script,
        *FAST,
        "data.num_samples=8192",  # 8 validation batches on each rank; 4 training steps (FAST's limit)
        "trainer.limit_val_batches=8",
        "trainer.max_epochs=2",
        f"output_root={tmp_path / 'outputs'}",
        *record_validations(validations, seconds_per_batch=0.5),  # 4 s a validation
        *record_starts(starts),
    )
    began = validations.with_name(validations.name + ".began")
    local_slurm.wait_for(began.exists, f"job {job_id} began no validation", timeout=300)
    _log, hpc = preempt_to_the_end(local_slurm, script, job_id, tmp_path / "outputs")
    saved = torch.load(hpc, weights_only=False)
    assert (saved["epoch"], saved["global_step"]) == (0, 4), "not saved in the first epoch's validation"
    assert starts_of(starts) == [(0, 0), (0, 4)]
    assert validations.read_text().split() == ["0", "1"], "a validation was skipped or run twice"


@pytest.mark.parametrize("from_file", [False, True], ids=["new-run", "run-from-a-checkpoint-file"])
def test_torchrun_job_is_requeued_by_its_batch_shell(local_slurm, tmp_path, from_file):
    """Under torchrun the batch shell gets the signal (--signal=B:USR1@90), requeues the job,
    and the requeued run resumes from last.ckpt instead of starting again from zero. Also a run
    started from another run's checkpoint (ckpt_path=<file>), which the requeue repeats after the
    script's ckpt_path=last: it was refused as older than the run's own work, and the job FAILED."""
    starts, record = tmp_path / "starts", tmp_path / "record"
    base = []
    if from_file:  # one epoch of 4 steps on one process
        run_train(*FAST, "trainer.max_epochs=1", f"output_root={tmp_path / 'base'}", "run_id=base")
        base = [f"ckpt_path={tmp_path / 'base' / 'base' / 'checkpoints' / 'last.ckpt'}"]
    script, job_id = start_slow_job(local_slurm, tmp_path, "torchrun", 12, *base)
    local_slurm.command("scancel", "--batch", "--signal=USR1", job_id)
    local_slurm.release_requeued(job_id)
    info = local_slurm.wait(job_id, timeout=600)
    log = local_slurm.log(script, job_id)
    assert info["JobState"] == "COMPLETED", f"job {job_id} ended {info['JobState']}:\n{log}"
    assert f"SIGUSR1: requeueing job {job_id}" in log

    first, second = starts_of(starts)
    assert first == ((1, 4) if from_file else (0, 0))
    assert second[0] > first[0] and second[1] > first[1], f"the requeued run started at {second}, not from last.ckpt"
    weights, _ = recorded(record)
    assert_same_weights(weights, world_size=4)
    assert {w["global_step"] for w in weights} == {first[1] + (12 - first[0]) * 2}  # 2 steps an epoch on 4 ranks


@pytest.mark.timeout(1200)  # four starts of 4 ranks on a CI machine of 2 cores
def test_requeue_after_a_killed_step_resumes_from_the_newest_checkpoint(local_slurm, tmp_path, capsys):
    """A node failure, as Slurm sees it: the step is SIGKILLed (no signal to save on), the job
    is requeued (`scontrol requeue`), three times. Each restart continues from the newest
    checkpoint (the timed last.ckpt mid-epoch), also when a stale hpc checkpoint lies beside
    it; global_step only grows, and the time lost is at most one checkpoint interval."""
    timed = ["callbacks.timed_checkpoint.every_minutes=0.005", "callbacks.timed_checkpoint.agree_every_seconds=0.05"]
    script, job_id = start_slow_job(local_slurm, tmp_path, "srun", 14, *timed)  # every 0.3 s, at a step end
    run = tmp_path / "outputs" / f"slurm-{job_id}"
    resumed_from, lost = [0], []
    for cycle in (1, 2, 3):
        local_slurm.wait_for(
            lambda: (newest_checkpoint(run) or (None, -1))[1] >= resumed_from[-1] + 3,
            f"job {job_id} made no progress in cycle {cycle}",
            timeout=300,
        )
        assert local_slurm.kill_step(job_id) == 4, "not every rank was found"  # all die at once
        killed = time.time()
        local_slurm.wait(job_id, timeout=120)  # srun: killed tasks -> the job FAILED
        local_slurm.command("scontrol", "requeue", job_id)
        path, step = newest_checkpoint(run)
        lost.append(killed - path.stat().st_mtime)
        assert step >= resumed_from[-1], f"cycle {cycle}: the newest checkpoint went back to step {step}"
        if cycle == 1:
            shutil.copy(path, tmp_path / "early.ckpt")
        if cycle == 2:  # an older hpc checkpoint, written later (as after an earlier preemption)
            shutil.copy(tmp_path / "early.ckpt", run / "hpc_ckpt_1.ckpt")
        resumed_from.append(step)
        local_slurm.release_requeued(job_id, restarts=cycle)
    info = local_slurm.wait(job_id, timeout=600)
    log = local_slurm.log(script, job_id)
    with capsys.disabled():  # the figures show in every run's output, not only with -s
        print(f"\nkill + requeue: 3 cycles, resumed at steps {resumed_from[1:]}, at most {max(lost):.1f} s lost")
    assert info["JobState"] == "COMPLETED", f"job {job_id} ended {info['JobState']}:\n{log}"
    steps = [step for _epoch, step in starts_of(tmp_path / "starts")]
    assert steps == resumed_from, "a restart did not continue from the newest checkpoint"
    assert steps == sorted(steps) and len(set(steps)) == len(steps), f"global_step went back: {steps}"
    weights, _ = recorded(tmp_path / "record")
    assert_same_weights(weights, world_size=4)
    # All 14 epochs done, each of its 2 steps once: a restart in the middle of an epoch trains
    # that epoch's remaining batches only (Lightning 2.6 counts them; from a new pass of the
    # DataLoader), and one after an epoch's last batch validates, then starts the next epoch
    # (batch_end_saves).
    last = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)
    assert (last["epoch"], last["global_step"]) == (13, 14 * 2)
    assert {w["global_step"] for w in weights} == {last["global_step"]}
    assert max(lost) < 30, f"lost {max(lost):.1f} s of training in one cycle"
    assert not list(run.rglob("*.partial")), "a partial checkpoint file is left"


def start_testing_job(local_slurm, tmp_path) -> tuple[Path, str, Path]:
    """Submit a 2-node job that trains an epoch, then tests (test_after_fit); return once it tests.
    Returns the script, the job id and the RecordStarts folder."""
    starts = tmp_path / "starts"
    script = write_script(tmp_path, nodes=2, launcher="srun")
    job_id = local_slurm.submit(
        script,
        *FAST,
        "trainer.max_epochs=1",
        "test_after_fit=true",
        # 3 test batches a rank: the ranks agree on a signal at the second's end (Lightning lets a last one end)
        "data.num_samples=3072",
        f"output_root={tmp_path / 'outputs'}",
        *record_starts(starts, seconds_per_test_batch=10),  # time to end the job while it tests
    )
    local_slurm.wait_for((starts / "testing").exists, f"job {job_id} did not begin testing", timeout=300)
    return script, job_id, starts


@pytest.mark.parametrize("ended_by", ["node-failure", "requeue-signal"])
def test_a_job_requeued_while_it_tests_after_fit_tests_again_and_completes(local_slurm, tmp_path, ended_by):
    """The requeued job finds the training ended and tests. A node failure (its step killed,
    then `scontrol requeue`): before, the epochs check refused the restart, exit 2, the job
    FAILED and nothing tested. SIGUSR1 (90 s before the time limit): before, nothing acted on it
    while testing; the time limit then ended the job, not requeued."""
    script, job_id, starts = start_testing_job(local_slurm, tmp_path)
    if ended_by == "node-failure":
        assert local_slurm.kill_step(job_id) == 4, "not every rank was found"
        local_slurm.wait(job_id, timeout=120)
        local_slurm.command("scontrol", "requeue", job_id)
    else:
        local_slurm.command("scancel", "--signal=USR1", job_id)
    local_slurm.release_requeued(job_id)
    assert not (starts / "tested").exists(), "the test ended before the job was ended"
    info = local_slurm.wait(job_id, timeout=600)
    log = local_slurm.log(script, job_id)
    assert info["JobState"] == "COMPLETED", f"job {job_id} ended {info['JobState']}:\n{log}"
    run = tmp_path / "outputs" / f"slurm-{job_id}"
    assert f"Restarted after the training had ended ({run / 'checkpoints' / 'last.ckpt'}): testing its weights" in log
    assert (starts / "tested").exists() and len(starts_of(starts)) == 1, "trained again, or did not test"
    assert ended_by == "node-failure" or "SIGUSR1: requeueing the job, which tests again" in log, log


# How SIGTERM comes, the job's state after it, and the sbatch options it needs.
SIGTERMS = {
    "scancel-steps": (["scancel", "--signal=TERM"], "FAILED", ()),  # the ranks only: the batch script exits 143
    "scancel": (["scancel"], "CANCELLED", ()),  # every process of the job, the batch shell too
    # The time limit without a warning: an ignored SIGURG replaces the scripts' SIGUSR1 (a requeue).
    "time-limit": ([], "TIMEOUT", ("--time=00:01:00", "--signal=URG@5")),
}


@pytest.mark.parametrize(
    ("how", "launcher"),
    [("scancel-steps", "srun"), ("scancel-steps", "torchrun"), ("scancel", "srun"), ("scancel", "torchrun"),
     ("time-limit", "srun")],
)  # fmt: skip
def test_sigterm_saves_and_the_job_exits_143_with_the_resume_command(local_slurm, tmp_path, how, launcher):
    """scancel or the time limit sends SIGTERM: the ranks save at the next step (here a save of
    5 s, in Slurm's grace time) and exit 143, so the job does not read COMPLETED, and the log says
    where to resume from. torchrun passes it on to its workers and exits 143 too (torch's own: 1,
    with a traceback). The batch shell gets it too (scancel, the time limit): it died at once,
    and the job's exit code read 0:15; it now waits for the ranks and exits as they do."""
    command, state, sbatch_options = SIGTERMS[how]
    saves = record_saves(tmp_path / "saves.txt", stop_save_seconds=5)
    if how == "time-limit":  # with DataLoader workers, which Slurm signals too (torch's died of it, and the run)
        saves.append("data.num_workers=1")
    script, job_id = start_slow_job(local_slurm, tmp_path, launcher, 400, *saves, sbatch_options=sbatch_options)
    run = tmp_path / "outputs" / f"slurm-{job_id}"
    before = newest_checkpoint(run)[1]
    if command:
        local_slurm.command(*command, job_id)
    info = local_slurm.wait(job_id, timeout=300)
    log = local_slurm.log(script, job_id)
    assert info["JobState"] == state, f"job {job_id} ended {info['JobState']}:\n{log}"
    path, step = newest_checkpoint(run)
    assert step >= before and path.name == "last.ckpt"
    line = next(line for line in log.splitlines() if line.startswith("Stopped by SIGTERM"))
    assert f"at step {step}: saved " in line and f"Resume: sbatch {script} resume={run}" in line
    assert "Traceback" not in log
    assert info["ExitCode"] == "143:0", f"job {job_id} exit code {info['ExitCode']}:\n{log}"


def test_the_command_that_a_cancelled_job_prints_resumes_it_in_a_new_job(local_slurm, tmp_path):
    """The line named `python train.py resume=...`, which on the login node would have trained
    there, on one process. It names the job's script, submitted again: a new job that continues
    the run in its folder (here under torchrun, whose own resume command the script's replaces)."""
    script, job_id = start_slow_job(local_slurm, tmp_path, "torchrun", 400)
    run = tmp_path / "outputs" / f"slurm-{job_id}"
    local_slurm.command("scancel", job_id)
    local_slurm.wait(job_id, timeout=300)
    log = local_slurm.log(script, job_id)
    line = next(line for line in log.splitlines() if line.startswith("Stopped by SIGTERM"))
    command = shlex.split(line.split("Resume: ", 1)[1])
    assert command[:2] == ["sbatch", str(script)] and command[2:] == [f"resume={run}"], line
    step = newest_checkpoint(run)[1]
    epochs = step // 2 + 2  # 2 steps an epoch: a few steps more
    resumed = local_slurm.run(script, *command[2:], f"trainer.max_epochs={epochs}", timeout=300)
    assert resumed.state == "COMPLETED", f"job {resumed.job_id} ended {resumed.state}:\n{resumed.log}"
    assert starts_of(tmp_path / "starts")[-1][1] == step, "it did not resume from the saved step"
    assert newest_checkpoint(run)[1] == 2 * epochs
    assert not (tmp_path / "outputs" / f"slurm-{resumed.job_id}").exists(), "the new job started a new run"


def test_a_cancelled_horovodrun_job_over_mpi_keeps_the_ranks_save(local_slurm, tmp_path):
    """launcher=horovodrun with MPI: Open MPI's mpirun killed the ranks 1 s after scancel's SIGTERM,
    here in the middle of a 5 s save (the checkpoint before it stayed whole). The script now gives
    them as long as Slurm does. (mpirun's output of the ranks' lines ends with the signal.)"""
    require_horovod(mpi=True)
    if os.environ.get("OMPI_MCA_plm") == "isolated":
        pytest.skip("this machine sets OMPI_MCA_plm=isolated: Open MPI's mpirun starts ranks on this node only")
    saves = tmp_path / "saves.txt"
    horovod = dict(strategy="horovod", gpus_per_node=1)
    slow_save = record_saves(saves, stop_save_seconds=5)
    script, job_id = start_slow_job(local_slurm, tmp_path, "horovodrun", 400, *slow_save, **horovod)
    run = tmp_path / "outputs" / f"slurm-{job_id}"
    local_slurm.command("scancel", job_id)
    info = local_slurm.wait(job_id, timeout=300)
    stopping = Path(f"{saves}.stopping")  # as the stop's save began
    assert stopping.exists(), f"no stop's save began:\n{local_slurm.log(script, job_id)}"
    path, step = newest_checkpoint(run)
    assert path.name == "last.ckpt" and path.stat().st_mtime > stopping.stat().st_mtime, "the stop's save was cut"
    assert step == int(saves.read_text().split()[-1])
    assert info["ExitCode"] == "143:0", info


def test_the_time_limit_while_testing_ends_the_job_with_143_and_the_command_that_tests(local_slurm, tmp_path):
    """SIGTERM while test_after_fit tests. Before, Lightning's handler took it: a broadcast inside
    the handler on each rank (it hung two ranks that each got two signals: test_agreement.py),
    then a new save of last.ckpt, in Slurm's grace time, of weights that a test does not change."""
    script, job_id, starts = start_testing_job(local_slurm, tmp_path)
    local_slurm.command("scancel", "--signal=TERM", job_id)
    info = local_slurm.wait(job_id, timeout=120)
    log = local_slurm.log(script, job_id)
    assert (info["JobState"], info["ExitCode"]) == ("FAILED", "143:0"), f"job {job_id} ended {info}:\n{log}"
    run = tmp_path / "outputs" / f"slurm-{job_id}"
    line = f"Stopped by SIGTERM at step 4, after the training's end: newest {run / 'checkpoints' / 'last.ckpt'}. "
    line += f"Nothing is left to train; to test: sbatch {script} resume={run} test_after_fit=true"
    assert line in log and "Traceback" not in log, log
    assert not (starts / "tested").exists(), "the test ended before the stop"


def test_two_job_steps_in_one_allocation_get_their_own_run_directories(local_slurm, tmp_path):
    """Two `srun python train.py` at once in one job: two runs, two directories."""
    script = tmp_path / "two-steps.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --cpus-per-task=1\n"
        "#SBATCH --time=00:10:00\nset -euo pipefail\nexport OMP_NUM_THREADS=1\n"
        f"cd {PROJECT}\n"
        "for step in 0 1; do\n"
        '    srun --nodes=1 --ntasks=1 --exact python train.py cluster.devices=1 cluster.num_nodes=1 "$@" &\n'
        "done\nwait\n"
    )
    outputs = tmp_path / "outputs"
    finished = local_slurm.run(script, *FAST, "trainer.max_epochs=1", f"output_root={outputs}", timeout=300)
    assert finished.state == "COMPLETED", f"job {finished.job_id} ended {finished.state}:\n{finished.log}"
    job = finished.job_id
    assert sorted(d.name for d in outputs.iterdir()) == [f"slurm-{job}", f"slurm-{job}.1"]
    for run in outputs.iterdir():
        assert (run / ".hydra" / "config.yaml").exists()
        assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)["global_step"] == 4


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


def test_an_experiment_given_to_a_script_that_asks_for_a_longer_job_stops_it_before_the_launch(local_slurm, tmp_path):
    """`sbatch <script> experiment=longer`, a file that sets cluster.slurm.time: the job would have
    trained under the script's time limit without a word (sbatch read it before train.py the file)."""
    (tmp_path / "mine" / "experiment").mkdir(parents=True)
    (tmp_path / "mine" / "experiment" / "longer.yaml").write_text("# @package _global_\ncluster: {slurm: {time: 30}}\n")
    script = write_script(tmp_path, nodes=1)
    search = f"hydra.searchpath=[file://{tmp_path / 'mine'}]"
    finished = local_slurm.run(script, *FAST, search, "experiment=longer", f"output_root={tmp_path / 'outputs'}")
    print(f"\nexperiment refused: job {finished.job_id} failed after {finished.seconds:.1f} s")
    assert (finished.state, finished.exit_code) == ("FAILED", "2:0"), finished.log
    (line,) = [line for line in finished.log.splitlines() if line.startswith("ERROR")]
    assert line.startswith("ERROR: experiment=longer, an argument of this script, sets cluster.slurm.time=30,"), line
    assert "--- rank0.log" not in finished.log and not (tmp_path / "outputs").exists(), "it launched"
    assert "Traceback" not in finished.log


def test_srun_given_a_total_task_count_stops_with_the_per_node_fix(local_slurm, tmp_path):
    """`srun -n 2 python train.py` (in salloc, or in a script of one's own): Lightning refused it in
    Hydra's error of several lines, exit 1. The topology check stops it first, with the fix."""
    train = ["python", "train.py", *FAST, "strategy=ddp", "trainer.devices=2", f"output_root={tmp_path / 'outputs'}"]
    command = ["srun", "--nodes=1", "--ntasks=2", *train]
    result = subprocess.run(command, cwd=PROJECT, env=local_slurm.env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert "Slurm started 2 tasks by their total (--ntasks=2, or srun -n 2)" in result.stderr
    assert "Fix: `--ntasks-per-node=2`" in result.stderr
    assert "Error executing job" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, result.stderr  # rank 0's
    outputs = tmp_path / "outputs"  # made for this start: removed with its run directory (by rank 0)
    assert not outputs.exists() or not any(outputs.iterdir()), "the refused start left a run directory"


def test_an_srun_of_several_tasks_from_a_shell_names_a_job_that_resumes_it(local_slurm, tmp_path):
    """`srun --ntasks-per-node=2 python train.py` typed into a shell (salloc, or the login node),
    stopped: its line said `python train.py resume=...`, which trains one process, where it is
    typed. It names a job of the run's size, which `python -m <package>.slurm` renders and submits."""
    outputs = tmp_path / "outputs"
    train = ["python", "train.py", *FAST, "cluster=localslurm", "strategy=ddp", "trainer.max_epochs=400"]
    train += [f"output_root={outputs}", *record_starts(tmp_path / "starts", seconds_per_step=0.25)]
    command = ["srun", f"--job-name={tmp_path.name}", "--nodes=1", "--ntasks-per-node=2", *train]
    srun = subprocess.Popen(command, cwd=PROJECT, env=local_slurm.env(), stderr=subprocess.PIPE, text=True)
    try:
        local_slurm.wait_for(lambda: any(outputs.glob("*/checkpoints/last.ckpt")), "no checkpoint", timeout=300)
        local_slurm.command("scancel", "--name", tmp_path.name)
        _, stderr = srun.communicate(timeout=120)
    finally:
        srun.kill()
    (run_dir,) = outputs.iterdir()  # slurm-<job>.0: the job's first step
    line = next((line for line in stderr.splitlines() if line.startswith("Stopped by SIGTERM")), stderr)
    render = "python -m {{ cookiecutter.package_name }}.slurm"
    render += " cluster=localslurm nodes=1 gpus=2 strategy=ddp launcher=srun"
    assert line.endswith(f"Resume: {render} --submit -- resume={run_dir}"), line


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
