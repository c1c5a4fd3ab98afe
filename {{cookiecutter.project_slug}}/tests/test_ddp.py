"""DDP on 2 CPU processes (gloo) through each way of starting them."""

import argparse
import os
import re
import signal
import subprocess
import sys

import pytest
from torch.distributed.elastic.multiprocessing.api import SignalException

from tests.helpers import (
    FAST,
    PROJECT,
    assert_same_weights,
    project_env,
    record_saves,
    recorded,
    run_train,
    start_until_first_checkpoint,
)

pytestmark = pytest.mark.slow

LAUNCHES = {
    # Lightning starts the second process itself (re-running train.py).
    "lightning": ((), ["strategy=ddp"]),
    # Lightning spawns both with multiprocessing.
    "ddp_spawn": ((), ["strategy=ddp_spawn"]),
    # torchrun starts both; each runs Hydra itself and must find the same run directory.
    "torchrun": ((sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2"), ["strategy=ddp"]),
}
TORCHRUN = (sys.executable, "-m", "{{ cookiecutter.package_name }}.torchrun")  # the project's (torchrun.py)


@pytest.mark.parametrize("launch", LAUNCHES)
def test_two_processes_train_in_step(launch, tmp_path):
    launcher, strategy = LAUNCHES[launch]
    record = tmp_path / "record"
    result = run_train(
        *FAST,
        *strategy,
        "trainer.accelerator=cpu",
        "trainer.devices=2",
        f"output_root={tmp_path / 'outputs'}",
        "+callbacks.record._target_=tests.helpers.RecordRanks",
        f"+callbacks.record.path={record}",
        launcher=launcher,
    )
    weights, writes = recorded(record)
    assert_same_weights(weights, world_size=2)
    assert all(w["world_size"] == 2 for w in weights)
    assert not any(w["sync_batchnorm"] for w in weights)  # off by default
    rank0, rank1 = (set(w["train_indices"]) for w in weights)
    assert rank0 and rank1 and not rank0 & rank1, "the ranks must train on different samples"

    run_dirs = list((tmp_path / "outputs").iterdir())
    assert len(run_dirs) == 1, f"ranks disagreed on the run directory: {run_dirs}"
    assert (run_dirs[0] / "checkpoints" / "last.ckpt").exists()
    assert set(writes) == {0}, f"only rank 0 may write checkpoints, got writes from ranks {sorted(writes)}"
    assert "sync_dist=True" not in result.stderr, "Lightning asks to sync a value the project logs"
    line = r"Throughput of the last epoch: (\d+) samples/s in total, (\d+) per rank"
    total, per_rank = (int(figure) for figure in re.search(line, result.stdout + result.stderr).groups())
    assert abs(total - 2 * per_rank) <= 1, "the total sums both ranks' figures, each rounded"


@pytest.mark.parametrize(("samples", "repeated"), [(264, 1), (256, 0)])  # test sets of 33 and 32 samples
def test_a_test_on_two_ranks_says_how_many_samples_it_tests_twice(samples, repeated, tmp_path):
    """Lightning's DistributedSampler fills the last rank's share with samples tested twice. Its
    warning came with every test on several ranks, asking for devices=1; the line says how many."""
    overrides = [*FAST, "strategy=ddp", "trainer.devices=2", "test_after_fit=true", f"data.num_samples={samples}"]
    result = run_train(*overrides, f"output_root={tmp_path}")
    output = result.stdout + result.stderr
    assert "Using `DistributedSampler` with the dataloaders" not in output, output
    line = "Test on 2 ranks: 1 of the 33 test samples are tested twice, so that every rank gets as many"
    assert line in output if repeated else "tested twice" not in output, output


def test_torchrun_stopped_by_sigterm_waits_for_the_save_and_exits_143_with_one_line(tmp_path):
    """Slurm's time limit or scancel signals torchrun too, which passes it on: the workers save
    and exit 143, and torch's torchrun then printed a traceback and exited 1 (the job read as
    a crash); it also killed its workers 30 s after the signal, here in the middle of a save of
    35 s (a large model). The project's torchrun module (the sbatch scripts' launcher=torchrun)
    waits for the save and exits 143."""
    run, saves = tmp_path / "run", tmp_path / "saves.txt"
    torchrun = (*TORCHRUN, "--nproc_per_node=2")
    overrides = ["strategy=ddp", "trainer.devices=2", "trainer.max_epochs=40"]
    overrides += record_saves(saves, seconds_per_step=0.2, stop_save_seconds=35)
    process = start_until_first_checkpoint(run, *overrides, launcher=torchrun)
    process.send_signal(signal.SIGTERM)  # torchrun alone: it signals its workers
    _stdout, stderr = process.communicate(timeout=240)
    assert process.returncode == 143, stderr
    assert "Traceback" not in stderr, stderr
    assert "torchrun: stopped by SIGTERM, which it passed on to its workers" in stderr
    step = int(saves.read_text().split()[-1])
    assert f"Stopped by SIGTERM at step {step}: saved " in stderr, stderr
    # The command that resumes it starts torchrun again (before, it named `python train.py`: one process).
    again = " ".join(["python", *torchrun[1:], str(PROJECT / "train.py"), f"resume={run}"])
    assert f"Resume: {again}" in stderr, stderr


def test_torchrun_exits_as_the_signal_says_also_when_torch_fails_while_it_handles_it(monkeypatch, capsys):
    """Seen once in CI: SIGTERM reached torchrun's agent before the timer of torch's metrics
    wrapper started, which then raised UnboundLocalError while it handled the SignalException:
    a traceback and exit 1, though the workers had saved and exited 143."""
    from {{ cookiecutter.package_name }} import torchrun

    def main():
        try:
            raise SignalException("Process 1 got signal: 15", sigval=signal.SIGTERM)
        except SignalException:
            raise UnboundLocalError("cannot access local variable 'start'") from None

    monkeypatch.setattr(torchrun, "main", main)
    monkeypatch.setattr(sys, "argv", ["torchrun", "--nproc_per_node=2", "train.py"])
    monkeypatch.setattr(argparse.ArgumentParser, "error", argparse.ArgumentParser.error)  # run() replaces it
    for name in ("RESTART_COMMAND", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"):  # run() sets them
        monkeypatch.setenv(name, os.environ.get(name, ""))
    with pytest.raises(SystemExit) as end:
        torchrun.run()
    assert end.value.code == 143
    assert capsys.readouterr().err == "torchrun: stopped by SIGTERM, which it passed on to its workers\n"


@pytest.mark.parametrize(
    ("option", "message"),
    [("--nproc_per_node=x", "torchrun: --nproc_per_node=x: Unsupported nproc_per_node value: x. Fix: "),
     ("--nnodes=x", "torchrun: --nnodes=x: invalid literal for int() with base 10: 'x'. Fix: --nnodes=<nodes>"),
     ("--nnodes=2:1", "torchrun: --nnodes=2:1: 2 to 1 nodes. Fix: --nnodes=<nodes>, or <min>:<max>"),
     ("--nproc_per_node=0", "torchrun: --nproc_per_node=0: no processes. Fix: --nproc_per_node=<processes per"),
     ("--max-restarts=-1", "torchrun: --max_restarts=-1: fewer than 0 restarts. Fix: --max-restarts=<0 or more>"),
     ("--monitor-interval=-1", "torchrun: --monitor_interval=-1.0: not a time. Fix: --monitor-interval=<seconds"),
     ("--master-port=99999", "torchrun: --master_port=99999: not a port. Fix: --master-port=<a free port, 1 to")],
)  # fmt: skip
def test_the_projects_torchrun_refuses_a_wrong_size_with_one_line(option, message, tmp_path):
    """torch's torchrun raised a ValueError (or AssertionError) traceback, exit 1."""
    command = [*TORCHRUN, option, str(PROJECT / "train.py"), f"output_root={tmp_path}"]
    result = subprocess.run(command, cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(message), result.stderr
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("options", "said"),
    [(["--rdzv-backend=foo"], "torchrun: ValueError: The rendezvous backend 'foo' is not registered."),
     (["--no-python"], "torchrun: FileNotFoundError: ")],
)  # fmt: skip
def test_an_option_torchrun_cannot_use_ends_the_projects_torchrun_with_one_line(options, said, tmp_path):
    """torch's torchrun ended in a traceback of 20 to 60 lines (these fail as it starts its workers)."""
    command = [*TORCHRUN, "--nproc_per_node=1", *options, "train.py", f"output_root={tmp_path}"]
    result = subprocess.run(command, cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=120)
    last = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert last.startswith(said) and last.endswith("--help lists the options); HYDRA_FULL_ERROR=1 shows the traceback")


def test_a_worker_stopped_by_a_wrong_override_ends_the_projects_torchrun_with_its_code_and_one_line(tmp_path):
    """A wrong override: each worker stops with one line, exit 2; torch's torchrun then raised
    ChildFailedError, a traceback, and exited 1."""
    command = [*TORCHRUN, "--nproc_per_node=2", str(PROJECT / "train.py"), "strategy=bogus", f"output_root={tmp_path}"]
    result = subprocess.run(command, cwd=PROJECT, env=project_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert "ERROR: strategy=bogus: no such choice of strategy" in result.stderr
    assert re.search(r"torchrun: the worker of rank \d exited 2 first \(its lines above say why\)", result.stderr)
