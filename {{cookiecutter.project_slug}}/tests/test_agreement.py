"""Ranks agree on a signal about once a second, not at every step (callbacks/agreement.py):
a signal to one rank still stops every rank at the same step, and training reads a
collective's answer on the host a few times, not once per step (on a GPU each read waits
for the GPU)."""

import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import pytorch_lightning as pl
import torch

from {{ cookiecutter.package_name }}.callbacks import agreement
from {{ cookiecutter.package_name }}.callbacks.agreement import AgreedFlag
from {{ cookiecutter.package_name }}.callbacks.requeue import SlurmRequeue
from {{ cookiecutter.package_name }}.callbacks.stop import SaveOnStop

from tests.helpers import (
    FAST,
    record_saves,
    record_validations,
    run_train,
    start_until,
    start_until_first_checkpoint,
    step_of,
)
from tests.slurm_helpers import record_starts


class Rank:
    """The part of a Trainer that AgreedFlag and SaveOnStop use; `others` is what the other rank sends."""

    def __init__(self, world_size=2, global_rank=0):
        self.world_size = world_size
        self.accumulate_grad_batches = 1
        self.is_global_zero = global_rank == 0
        self.strategy = self
        self.root_device = torch.device("cpu")
        self.others = [0.0, 0.0]
        self.reduced_at: list[int] = []
        self.calls = 0

    def reduce(self, tensor, reduce_op):
        assert reduce_op == "max"
        self.reduced_at.append(self.calls)
        return torch.maximum(tensor, torch.tensor(self.others))


STEP = 1 / 128  # seconds a step takes below (a binary fraction: exact sums)


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(agreement, "monotonic", lambda: now[0])
    return now


def agree(flag: AgreedFlag, rank: Rank, clock, calls: int, raised_from: int | None = None) -> list[int]:
    """The calls at which the ranks agreed that a flag was raised (by another rank, from a call on)."""
    agreed = []
    for _ in range(calls):
        rank.calls += 1
        clock[0] += STEP
        if raised_from is not None and rank.calls >= raised_from:
            rank.others[0] = 1.0
        if flag.agreed(rank, False):
            agreed.append(rank.calls)
    return agreed


def test_one_process_needs_no_agreement():
    rank = Rank(world_size=1)
    assert AgreedFlag().agreed(rank, True) and not AgreedFlag().agreed(rank, False)
    assert rank.reduced_at == []


def test_rank_zero_spaces_the_agreements_about_a_second_apart(clock):
    rank = Rank()
    agreed = agree(AgreedFlag(seconds=1.0), rank, clock, calls=300, raised_from=150)
    # At the first two calls (nothing measured yet), then every 128 steps: a second.
    assert rank.reduced_at == [1, 2, 130, 258]
    assert agreed == [258], "another rank's flag counts at the next agreement, on every rank"


def test_the_other_ranks_follow_rank_zeros_interval(clock):
    rank = Rank(global_rank=1)
    rank.others = [0.0, 50.0]  # rank 0 says: agree again in 50 steps
    agree(AgreedFlag(seconds=1.0), rank, clock, calls=120)
    assert rank.reduced_at == [1, 51, 101]


def test_a_stop_is_agreed_on_at_the_pace_of_training_steps_after_fast_validation_batches(clock, tmp_path):
    """Before, training and validation batches shared one countdown: the sanity check's or a
    validation's fast batches (a millisecond) set the next agreement 1000 training steps away,
    minutes for steps of a tenth of a second, and a stop outlasted Slurm's grace time unsaved."""
    rank = Rank()
    rank.sanity_checking = False
    rank._signal_connector = SimpleNamespace(received_sigterm=False)
    stopper = SaveOnStop(dirpath=str(tmp_path), run_dir=str(tmp_path))

    def batches(hook, count: int, seconds: float) -> None:
        for _ in range(count):
            rank.calls += 1
            clock[0] += seconds
            hook(rank, None, None, None, 0)

    rank.sanity_checking = True
    batches(stopper.on_validation_batch_end, 2, 1 / 1024)
    assert rank.reduced_at == [], "the sanity check agrees on nothing"
    rank.sanity_checking = False
    batches(stopper.on_train_batch_end, 30, 1 / 8)  # agreements at calls 3, 4, then every 8 steps
    batches(stopper.on_validation_batch_end, 100, 1 / 1024)
    rank.others[0] = 1.0  # another rank got SIGTERM as training went on
    batches(stopper.on_train_batch_end, 10, 1 / 8)
    assert rank._signal_connector.received_sigterm, f"no stop within 10 steps after the validation: {rank.reduced_at}"


def test_slurms_requeue_saves_after_a_batch_that_steps_the_optimizer_not_between_two(monkeypatch):
    """With accumulate_grad_batches=2 the requeue saved after any batch: one that did not step lost
    its gradients, and the requeued job's epoch left it out (test_resume.py runs the same rule
    for a stop)."""
    requeue = SlurmRequeue()
    requeue.active = requeue.requested = True
    saves = []
    monkeypatch.setattr(requeue, "_save_and_requeue", saves.append)
    accumulating = [True]
    epoch_loop = SimpleNamespace(_should_accumulate=lambda: accumulating[0])
    rank = SimpleNamespace(world_size=1, accumulate_grad_batches=2, fit_loop=SimpleNamespace(epoch_loop=epoch_loop))
    requeue.on_train_batch_end(rank, None, None, None, 0)
    assert saves == [], "saved between two optimizer steps"
    accumulating[0] = False
    requeue.on_train_batch_end(rank, None, None, None, 1)
    assert saves == [rank]


class CountCollectives(pl.Callback):
    """Test-only: how many collectives each rank started (through torch.distributed, as
    Lightning and the project call them) from the end of its first training batch to the
    end of its last (not the epoch's end: its logging and checkpoints are collectives)."""

    def __init__(self, path: str):
        self.path = Path(path)
        self.count = 0
        self.at_batch_ends: list[int] = []

    def on_train_start(self, trainer, pl_module):
        def counted(collective):
            def call(*args, **kwargs):
                self.count += 1
                return collective(*args, **kwargs)

            return call

        for name in ("broadcast", "all_reduce"):
            setattr(torch.distributed, name, counted(getattr(torch.distributed, name)))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.at_batch_ends.append(self.count)

    def on_train_end(self, trainer, pl_module):
        self.path.mkdir(parents=True, exist_ok=True)
        between = self.at_batch_ends[-1] - self.at_batch_ends[0]
        (self.path / f"rank{trainer.global_rank}.txt").write_text(f"{between} {len(self.at_batch_ends)}")


@pytest.mark.slow
def test_two_processes_do_not_agree_at_every_step(tmp_path):
    """40 steps on 2 processes: Lightning 2.6 alone broadcasts a SIGTERM flag at each."""
    steps = 40
    run_train(
        *FAST,
        "strategy=ddp",
        "trainer.devices=2",
        f"data.num_samples={steps * 32 * 2}",
        f"trainer.limit_train_batches={steps}",
        "trainer.limit_val_batches=0",
        "trainer.max_epochs=1",
        "callbacks.save_on_stop.agree_every_seconds=600",  # no third agreement, even with a stalled step
        "callbacks.timed_checkpoint.agree_every_seconds=600",
        f"output_root={tmp_path / 'outputs'}",
        "+callbacks.count._target_=tests.test_agreement.CountCollectives",
        f"+callbacks.count.path={tmp_path / 'count'}",
    )
    counted = [(tmp_path / "count" / f"rank{rank}.txt").read_text().split() for rank in (0, 1)]
    assert [int(batches) for _count, batches in counted] == [steps, steps]
    # The agreements at the second step's end, on a signal and on the time to checkpoint (rank 0
    # then asks for the next in 600 s).
    assert all(int(count) <= 2 for count, _batches in counted), f"collectives after the first step: {counted}"


@pytest.mark.slow
def test_a_signal_to_one_rank_stops_both_at_the_same_step(tmp_path):
    """SIGTERM reaches rank 1 only: the ranks agree on it, both stop after the same step
    (the other would wait for the first in the next all-reduce), rank 0 saves, exit 143.
    Rank 0's save takes 8 s: rank 1 must not leave before it ends (Lightning's launcher, like
    torchrun and srun --kill-on-bad-exit, kills the others once one rank has exited non-zero,
    and checks every 5 s: before, rank 0 was killed mid-save and the command exited 137)."""
    run = tmp_path / "run"
    slow = record_saves(tmp_path / "saves.txt", seconds_per_step=0.2, stop_save_seconds=8)
    process = start_until_first_checkpoint(run, "strategy=ddp", "trainer.devices=2", "trainer.max_epochs=40", *slow)
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
    # The train.py child: Open MPI's singleton init (Lightning's MPI detection, with mpi4py) may start a helper.
    rank_1 = [pid for pid in children if b"train.py" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(rank_1) == 1, f"Lightning should have started one more train.py, found {rank_1} among {children}"
    os.kill(int(rank_1[0]), signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=240)
    assert process.returncode == 143, stderr
    line = next(line for line in stderr.splitlines() if line.startswith("Stopped by SIGTERM"))
    assert f"at step {step_of(run / 'checkpoints' / 'last.ckpt')}: saved " in line
    assert "Traceback" not in stderr


@pytest.mark.slow
def test_sigterm_to_every_process_of_a_two_rank_run_saves_and_exits_143(tmp_path):
    """As Slurm's time limit, scancel and `timeout` signal a job: every process at once. Rank 1
    then got SIGTERM twice (the group's, and rank 0's as Lightning's launcher passes it on),
    took the second for "stop now" and left mid-step: rank 0's all-reduce failed with a
    traceback, exit 1, nothing saved since the last epoch's checkpoint. With the default sanity
    check, whose fast batches once spaced the agreements up to 1000 training steps apart."""
    run = tmp_path / "run"
    saves = record_saves(tmp_path / "saves.txt", seconds_per_step=0.3)
    overrides = ["strategy=ddp", "trainer.devices=2", "trainer.max_epochs=40", "trainer.num_sanity_val_steps=2", *saves]
    process = start_until_first_checkpoint(run, *overrides, own_group=True)
    time.sleep(0.5)  # into the second epoch
    os.killpg(process.pid, signal.SIGTERM)
    _stdout, stderr = process.communicate(timeout=240)
    assert process.returncode == 143, stderr
    line = next(line for line in stderr.splitlines() if line.startswith("Stopped by SIGTERM"))
    saved = step_of(run / "checkpoints" / "last.ckpt")
    assert f"at step {saved}: saved " in line
    assert saved <= 16, "signalled at step 5 or 6: stopped seconds later, not at the next agreement"
    assert "Traceback" not in stderr


@pytest.mark.parametrize(
    ("signum", "stage"),
    [(signal.SIGTERM, "training"), (signal.SIGTERM, "validation"), (signal.SIGINT, "training")],
    ids=["sigterm-training", "sigterm-validation", "ctrl-c-training"],
)
def test_a_signal_to_every_process_of_a_run_with_dataloader_workers_saves(tmp_path, signum, stage):
    """Slurm's time limit, scancel and `timeout` signal every process, the DataLoader workers too
    (data.in_memory=false uses them, as most data of one's own does). torch's workers died of
    SIGTERM, and the run stopped on "DataLoader worker ... is killed by signal" before its save:
    a traceback, exit 1, the work since the last checkpoint lost. Ctrl-C saved, but each worker
    printed the stop's line again."""
    run, validations = tmp_path / "run", tmp_path / "validations.txt"
    overrides = ["data.num_workers=1", "trainer.max_epochs=40", *record_saves(tmp_path / "saves.txt", 0.2)]
    overrides += record_validations(validations, seconds_per_batch=0.5 if stage == "validation" else 0)
    written = (
        validations.with_name(validations.name + ".began")
        if stage == "validation"
        else run / "checkpoints" / "last.ckpt"
    )
    process = start_until(written, run, *overrides, own_group=True)
    os.killpg(process.pid, signum)
    _stdout, stderr = process.communicate(timeout=240)
    assert process.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr and "DataLoader worker" not in stderr, stderr
    name = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
    assert stderr.count(f"\n{name}: saving") == 1, stderr  # the main process's line, not a worker's too
    assert f"Stopped by {name} at step {step_of(run / 'checkpoints' / 'last.ckpt')}: saved " in stderr, stderr


@pytest.mark.slow
def test_sigterm_to_every_process_of_a_two_rank_run_while_it_tests_stops_it_with_143(tmp_path):
    """test_after_fit on two ranks, signalled as Slurm's time limit does. Before, Lightning's own
    handler broadcast inside the handler at each signal, and rank 1 got two (the group's, and
    rank 0's launcher's): the broadcasts no longer paired, and the run hung until killed."""
    run, starts = tmp_path / "run", tmp_path / "starts"
    overrides = ["strategy=ddp", "trainer.devices=2", "trainer.max_epochs=1", "test_after_fit=true"]
    overrides += ["data.num_samples=2048", *record_starts(starts, seconds_per_test_batch=1)]  # 4 test batches a rank
    process = start_until(starts / "testing", run, *overrides, own_group=True)
    os.killpg(process.pid, signal.SIGTERM)
    _stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stderr
    line = f"Stopped by SIGTERM at step 4, after the training's end: newest {run / 'checkpoints' / 'last.ckpt'}. "
    line += f"Nothing is left to train; to test: python train.py resume={run} test_after_fit=true"
    assert line in stderr and "Traceback" not in stderr, stderr
    assert not (starts / "tested").exists(), "the test ended before the stop"
