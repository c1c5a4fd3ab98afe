"""Resuming from last.ckpt continues where the first run stopped."""

import csv
import itertools
import os
import re
import signal

import pytest
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from {{ cookiecutter.package_name }}.data.synthetic import SyntheticDataModule
from {{ cookiecutter.package_name }}.models.classifier import ImageClassifier

from tests.helpers import (
    FAST,
    record_batches,
    record_saves,
    record_validations,
    run_train,
    save_after_step,
    write_small_mnist,
)
from tests.slurm_helpers import record_starts, starts_of


def test_resume_continues_at_the_right_step(tmp_path):
    common = [*FAST, f"output_root={tmp_path}", "run_id=resumable"]
    run_train(*common, "trainer.max_epochs=1")
    checkpoint = tmp_path / "resumable" / "checkpoints" / "last.ckpt"
    first = torch.load(checkpoint, weights_only=False)
    assert (first["epoch"], first["global_step"]) == (0, 4)

    result = run_train(*common, "trainer.max_epochs=2", "ckpt_path=last")
    assert "Restoring states from the checkpoint" in result.stdout + result.stderr
    second = torch.load(checkpoint, weights_only=False)
    assert (second["epoch"], second["global_step"]) == (1, 8)  # one more epoch, not two
    # The optimizer state was restored too (Adam's step count kept counting).
    steps = [state["step"] for state in second["optimizer_states"][0]["state"].values()]
    assert all(int(step) == 8 for step in steps)
    # The CSV logger kept the first start's rows (Lightning's deleted its metrics.csv on a resume).
    assert "will be deleted" not in result.stdout + result.stderr
    with open(tmp_path / "resumable" / "csv" / "metrics.csv") as metrics:
        epochs = {row["epoch"] for row in csv.DictReader(metrics) if row.get("val/loss")}
    assert epochs == {"0", "1"}, epochs


def test_last_checkpoint_follows_every_epoch_even_without_improvement(tmp_path):
    # lr=0 on a model without dropout or BatchNorm: val/loss never improves after epoch 0.
    flat = ["model=autoencoder", "model.optimizer.lr=0", "trainer.max_epochs=3"]
    run_train(*FAST, *flat, f"output_root={tmp_path}", "run_id=flat")
    last = torch.load(tmp_path / "flat" / "checkpoints" / "last.ckpt", weights_only=False)
    assert (last["epoch"], last["global_step"]) == (2, 12)
    assert len(list((tmp_path / "flat" / "checkpoints").glob("epoch=0-*.ckpt"))) == 1  # the best stays


def test_last_checkpoint_every_n_epochs_still_saves_the_end(tmp_path):
    """Every 2nd epoch over 3: Lightning's ModelCheckpoint alone would leave last.ckpt at the
    end of epoch 2, and the third epoch's work would be lost."""
    common = [*FAST, "callbacks.last_checkpoint.every_n_epochs=2", f"output_root={tmp_path}", "run_id=sparse"]
    run_train(*common, "trainer.max_epochs=3")
    checkpoint = tmp_path / "sparse" / "checkpoints" / "last.ckpt"
    assert torch.load(checkpoint, weights_only=False)["global_step"] == 12  # 3 epochs of 4 steps

    run_train(*common, "trainer.max_epochs=4", "ckpt_path=last")
    assert torch.load(checkpoint, weights_only=False)["global_step"] == 16  # one more epoch, not two


def test_a_save_after_an_epochs_last_batch_resumes_whole_epochs(tmp_path):
    """A timed, stop or preemption save can fall after an epoch's last batch (step 4 of 4), here
    with no validation to follow. Lightning 2.6 resumed it in the next epoch without starting
    that epoch, and checkpoints of that epoch then resumed an epoch short (8 steps after 3
    epochs) or a batch over (13)."""
    after_last_batch, mid_epoch = tmp_path / "after-last-batch.ckpt", tmp_path / "mid-epoch.ckpt"
    no_validation = [*FAST, "trainer.limit_val_batches=0", f"output_root={tmp_path}"]
    run_train(*no_validation, "run_id=first", "trainer.max_epochs=1", *save_after_step(4, after_last_batch))
    second = [*no_validation, "run_id=second", *record_starts(tmp_path / "second")]
    run_train(*second, "trainer.max_epochs=2", f"ckpt_path={after_last_batch}", *save_after_step(6, mid_epoch))
    run_train(*second, "trainer.max_epochs=3", "ckpt_path=last")  # from the end of epoch 1
    third = [*no_validation, "run_id=third", *record_starts(tmp_path / "third")]
    run_train(*third, "trainer.max_epochs=3", f"ckpt_path={mid_epoch}")  # from the middle of epoch 1

    for run in ("second", "third"):
        last = torch.load(tmp_path / run / "checkpoints" / "last.ckpt", weights_only=False)
        assert (last["epoch"], last["global_step"]) == (2, 12), f"{run}: 3 epochs of 4 steps"
    assert starts_of(tmp_path / "second") == [(1, 4), (2, 8)]
    assert starts_of(tmp_path / "third") == [(1, 6)]


@pytest.mark.parametrize(
    ("step", "overrides", "validated"),
    [(4, [], ["0", "1"]), (2, ["+trainer.val_check_interval=2"], ["0", "0", "1", "1"])],
    ids=["epochs-last-batch", "mid-epoch-validation"],
)
def test_a_save_after_the_batch_a_validation_follows_resumes_with_that_validation(tmp_path, step, overrides, validated):
    """A timed or preemption save can fall after the training batch that a validation follows
    (an epoch's last, or every 2nd with val_check_interval=2). Lightning 2.6 resumed it past
    that validation: its metrics, the best checkpoint they choose and the epoch's checkpoint
    were lost. Now the resume runs it first, then trains on."""
    saved, validations = tmp_path / "saved.ckpt", tmp_path / "validations.txt"
    common = [*FAST, *overrides, f"output_root={tmp_path}"]
    run_train(*common, "run_id=first", "trainer.max_epochs=1", *save_after_step(step, saved))
    resume = [*common, "run_id=second", "trainer.max_epochs=2", f"ckpt_path={saved}"]
    run_train(*resume, *record_starts(tmp_path), *record_validations(validations, seconds_per_batch=0))
    assert starts_of(tmp_path) == [(0, step)]
    assert validations.read_text().split() == validated, "a validation was skipped or run twice"
    last = torch.load(tmp_path / "second" / "checkpoints" / "last.ckpt", weights_only=False)
    assert (last["epoch"], last["global_step"]) == (1, 8), "training steps lost or trained twice"
    assert list((tmp_path / "second" / "checkpoints").glob("epoch=*.ckpt")), "no best checkpoint"


def test_a_run_ended_by_max_steps_mid_epoch_resumes_the_rest_of_that_epoch(tmp_path):
    """trainer.max_steps (or max_time) can end the training in the middle of an epoch. Its last.ckpt
    counted that epoch as done: a resume with a larger limit skipped the rest of the epoch, its
    validation and its best checkpoint, and ended at max_epochs 2 steps short here."""
    common = [*FAST, f"output_root={tmp_path}", "run_id=limited", "trainer.max_epochs=2"]
    validations = tmp_path / "validations.txt"
    run_train(*common, "+trainer.max_steps=2")
    run_train(*common, "ckpt_path=last", *record_starts(tmp_path), *record_validations(validations, 0))
    assert starts_of(tmp_path) == [(0, 2)]
    assert validations.read_text().split() == ["0", "1"]
    last = torch.load(tmp_path / "limited" / "checkpoints" / "last.ckpt", weights_only=False)
    assert (last["epoch"], last["global_step"]) == (1, 8), "2 epochs of 4 steps"


def test_a_run_ended_by_max_time_says_how_to_train_on_and_exits_124(tmp_path):
    """Lightning said only "Time limit reached": nothing named the command that trains on, and the
    run exited 0 as if finished (a sweep called it COMPLETED). Stopped in its last epoch, Lightning
    counted that epoch as begun, max_epochs as reached: no line at all, and test_after_fit tested
    the half-trained weights."""
    common = [*FAST, f"output_root={tmp_path}"]
    slow = record_starts(tmp_path, seconds_per_step=0.5)
    ended = run_train(*common, "trainer.max_epochs=20", "run_id=timed", "+trainer.max_time={seconds:2}", *slow,
                      check=False)  # fmt: skip
    said = ended.stdout + ended.stderr  # Lightning's info lines: stdout once Hydra's logging is set up
    assert ended.returncode == 124, said
    assert re.search(r"trainer.max_time ended the training at step \d+ \(\d whole epoch\(s\)\), before its end", said)
    assert f"To train on: python train.py resume={tmp_path / 'timed'} +trainer.max_time=<a longer" in said
    # in the last of 2 epochs (4 steps each, 1 s a step: stopped at step 5 or 6), with a test to follow
    slower = record_starts(tmp_path, seconds_per_step=1.0)
    last = ["trainer.max_epochs=2", "run_id=last", "test_after_fit=true", "+trainer.max_time={seconds:5}"]
    ended = run_train(*common, *last, *slower, check=False)
    said = ended.stdout + ended.stderr
    assert ended.returncode == 124, said
    assert re.search(r"ended the training at step [567] \(1 whole epoch\(s\)\), before its end; saved", said), said
    assert "To train on (and then tests): python train.py resume=" in said and "test/acc" not in said
    finished = run_train(*common, "trainer.max_epochs=1", "run_id=whole", "+trainer.max_time={hours:1}")
    said = finished.stdout + finished.stderr
    assert "trainer.max_time ended" not in said and "`max_epochs=1` reached" in said
    # without max_epochs or max_steps, the time limit is the training's planned end
    timed_only = ["trainer.max_epochs=-1", "run_id=budget", "+trainer.max_time={seconds:2}"]
    finished = run_train(*common, *timed_only, *slow)
    assert "trainer.max_time ended" not in finished.stdout + finished.stderr


class NanWeightsAtStep(pl.Callback):
    """Test-only: the weights become nan at a training step's end, as a diverging run's do."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.step:
            with torch.no_grad():
                for parameter in pl_module.parameters():
                    parameter.fill_(float("nan"))


def test_a_run_that_diverges_stops_with_one_line_and_keeps_its_checkpoints_from_before(tmp_path):
    """val/loss nan: Lightning trained on to max_epochs for nothing, exited 0, and saved the nan
    weights as last.ckpt over epoch 0's."""
    common = [*FAST, f"output_root={tmp_path}", "run_id=diverged", "trainer.max_epochs=3"]
    nan = [f"+callbacks.nan._target_={__name__}.NanWeightsAtStep", "+callbacks.nan.step=6"]  # in epoch 1
    stopped = run_train(*common, *nan, check=False)
    assert stopped.returncode == 1 and "Traceback" not in stopped.stderr, stopped.stderr
    best = tmp_path / "diverged" / "checkpoints" / "epoch=0-step=4.ckpt"
    line = stopped.stderr.strip().splitlines()[-1]
    assert line == (
        "ERROR: val/loss=nan at epoch 1, step 8: the training diverged, and would train on for nothing; its best "
        f"checkpoint, from before, is {best}. Fix: a smaller learning rate (model.optimizer.lr=...) or gradient "
        f"clipping (+trainer.gradient_clip_val=1.0), in a new run (from that checkpoint: ckpt_path={best})"
    ), line
    last = torch.load(tmp_path / "diverged" / "checkpoints" / "last.ckpt", weights_only=False)
    assert last["global_step"] == 4 and all(weights.isfinite().all() for weights in last["state_dict"].values())


def test_a_mid_epoch_resume_with_another_batch_size_is_refused_with_the_way_on(tmp_path):
    """The loader went on after as many batches as the checkpoint had trained, counted in the new
    size: after 2 batches of 32, batches of 16 began at sample 32 of the epoch's order (32-63
    trained twice), batches of 64 at sample 128 (64-127 never), without a word."""
    common = [*FAST, f"output_root={tmp_path}", "run_id=limited", "trainer.max_epochs=2"]
    run_train(*common, "+trainer.max_steps=2")
    saved = (tmp_path / "limited" / "checkpoints" / "last.ckpt").read_bytes()
    refused = run_train(*common, "ckpt_path=last", "data.batch_size=16", check=False)
    assert refused.returncode == 2, refused.stderr
    line = "data.batch_size=16 on 1 process(es): the checkpoint was saved 2 batches into epoch 0, whose batches "
    fix = "(data.batch_size=32, 1 process(es) by trainer.devices, trainer.max_epochs=1)"
    assert line in refused.stderr and fix in refused.stderr
    assert (tmp_path / "limited" / "checkpoints" / "last.ckpt").read_bytes() == saved  # nothing trained
    # another seed or number of samples: another order, whose first 2 batches were not the ones trained
    for change, said in ("seed=7", "seed=7: "), ("data.num_samples=512", "512 training samples (data.num_samples"):
        refused = run_train(*common, "ckpt_path=last", change, check=False)
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
    assert "whose order of samples came from 256 training samples" in refused.stderr
    assert (tmp_path / "limited" / "checkpoints" / "last.ckpt").read_bytes() == saved
    run_train(*common, "ckpt_path=last", "trainer.max_epochs=1")  # the fix: the epoch's end, then the new size
    run_train(*common, "ckpt_path=last", "data.batch_size=16")


def test_a_resume_with_another_validation_split_is_refused(tmp_path):
    """MNIST's data.seed and data.val_size choose the samples held out to validate: a resume with
    others trained on samples the run had validated on (and picked its best checkpoint by them)."""
    root = write_small_mnist(tmp_path / "mnist")
    mnist = ["data=mnist", f"data.root={root}", "data.download=false", "data.val_size=32"]
    common = [*(arg for arg in FAST if not arg.startswith(("experiment=", "data.num_samples="))), *mnist]
    common += [f"output_root={tmp_path}", "run_id=split"]
    run_train(*common, "trainer.max_epochs=1")
    saved = (tmp_path / "split" / "checkpoints" / "last.ckpt").read_bytes()
    for change in ("data.seed=1", "data.val_size=64"):
        refused = run_train(*common, "trainer.max_epochs=2", "ckpt_path=last", change, check=False)
        assert refused.returncode == 2, refused.stderr
        line = f"{change}: the checkpoint's run ({tmp_path / 'split' / 'checkpoints' / 'last.ckpt'}) split its data"
        assert line in refused.stderr and "of the resume (the run's: data.seed=0 data.val_size=32)" in refused.stderr
        assert "Traceback" not in refused.stderr
    assert (tmp_path / "split" / "checkpoints" / "last.ckpt").read_bytes() == saved  # nothing trained
    run_train(*common, "trainer.max_epochs=2", "ckpt_path=last", "seed=7")  # the shuffle's seed may change


def test_the_mid_epoch_check_counts_the_processes_that_share_the_order(tmp_path):
    """Without Lightning's distributed sampler (+trainer.use_distributed_sampler=false) each process
    has the whole order: its loader saves 1, and a requeue on as many processes must pass."""
    from {{ cookiecutter.package_name }}.launch.errors import SetupError
    from {{ cookiecutter.package_name }}.launch.resume_checks import StartCheckpoint, check_mid_epoch_batches

    loader = {"epoch": 0, "batches": 2, "batch_size": 32, "processes": 1}
    fit = {"state_dict": {"combined_loader": [loader]}, "epoch_loop.batch_progress": {"is_last_batch": False}}
    mid = str(tmp_path / "mid.ckpt")
    torch.save({"loops": {"fit_loop": fit}}, mid)
    check_mid_epoch_batches(32, 1, "trainer.devices", StartCheckpoint(mid))
    with pytest.raises(SetupError, match=r"on 2 process\(es\): the checkpoint was saved 2 batches into epoch 0"):
        check_mid_epoch_batches(32, 2, "trainer.devices", StartCheckpoint(mid))
    # the order's seed and samples: checked where the checkpoint kept them (older ones did not)
    check_mid_epoch_batches(32, 1, "trainer.devices", StartCheckpoint(mid), {"seed": 7, "samples": 10})
    unseeded = fit | {"state_dict": {"combined_loader": [loader | {"seed": None}]}}  # a sampler of one's own
    torch.save({"loops": {"fit_loop": unseeded}}, tmp_path / "mid.ckpt")
    check_mid_epoch_batches(32, 1, "trainer.devices", StartCheckpoint(mid), {"seed": 42, "samples": 10})
    seeded = fit | {"state_dict": {"combined_loader": [loader | {"seed": 42}]}}
    torch.save({"loops": {"fit_loop": seeded}}, tmp_path / "mid.ckpt")
    check_mid_epoch_batches(32, 1, "trainer.devices", StartCheckpoint(mid), {"seed": 42, "samples": 10})
    with pytest.raises(SetupError, match=r"^seed=7: the checkpoint was saved 2 batches into epoch 0, whose order of"):
        check_mid_epoch_batches(32, 1, "trainer.devices", StartCheckpoint(mid), {"seed": 7, "samples": 10})


@pytest.mark.parametrize("in_memory", [True, False], ids=["in-memory", "sample-by-sample"])
def test_a_resume_in_the_middle_of_an_epoch_trains_the_batches_an_unstopped_run_trains(tmp_path, in_memory):
    """The resumed epoch trained the first batches of its order again and never its last ones, and
    one process drew later epochs' orders from wherever the random state was (data/resumable.py)."""
    common = [*FAST, f"output_root={tmp_path}", "trainer.max_epochs=3"]
    if not in_memory:  # MNIST's files, read by a loader worker
        root = write_small_mnist(tmp_path / "mnist")
        files = ["data=mnist", f"data.root={root}", "data.download=false", "data.val_size=32", "data.in_memory=false"]
        common = [arg for arg in common if not arg.startswith(("experiment=", "data.num_samples="))] + files
    run_train(*common, "run_id=whole", *record_batches(tmp_path / "whole.txt"))
    run_train(*common, "run_id=part", "+trainer.max_steps=6", *record_batches(tmp_path / "part.txt"))  # epoch 1
    run_train(*common, "run_id=part", "ckpt_path=last", *record_batches(tmp_path / "part.txt"))
    whole, part = ((tmp_path / name).read_text().splitlines() for name in ("whole.txt", "part.txt"))
    assert len(whole) == 12 and part == whole


def resumed_from_step_6_trains_the_unstopped_runs_batches(tmp_path, *overrides: str) -> None:
    """3 epochs of 4 batches, and a new run from a checkpoint saved after step 6 (mid-epoch): it
    trains the batches the first run trained after that step."""
    common = [*FAST, f"output_root={tmp_path}", "trainer.max_epochs=3", *overrides]
    mid_epoch = tmp_path / "mid-epoch.ckpt"
    run_train(*common, "run_id=whole", *record_batches(tmp_path / "whole.txt"), *save_after_step(6, mid_epoch))
    run_train(*common, "run_id=resumed", f"ckpt_path={mid_epoch}", *record_batches(tmp_path / "resumed.txt"))
    whole, resumed = ((tmp_path / name).read_text().splitlines() for name in ("whole.txt", "resumed.txt"))
    assert len(whole) == 12 and resumed == whole[6:]


class OneCycleClassifier(ImageClassifier):
    """Test-only: a model whose learning-rate schedule reads the run's number of optimizer steps."""

    def configure_optimizers(self):
        optimizer = self.optimizer(self.parameters())
        steps = self.trainer.estimated_stepping_batches
        schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-3, total_steps=steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


def test_a_mid_epoch_resume_of_a_model_that_reads_the_number_of_steps_trains_the_batches_an_unstopped_run_trains(
    tmp_path,
):
    """Lightning issue #20550: where configure_optimizers reads trainer.estimated_stepping_batches
    (a OneCycleLR), Lightning never gave the training loader its saved position, and the resumed
    epoch trained its first batches again (callbacks/batch_end_saves.py gives it back)."""
    resumed_from_step_6_trains_the_unstopped_runs_batches(tmp_path, f"model._target_={__name__}.OneCycleClassifier")


class PlainLoaderData(SyntheticDataModule):
    """Test-only: a data module of a user's own, whose training loader is a plain DataLoader."""

    def train_dataloader(self):
        samples = TensorDataset(self.train_set.images, self.train_set.labels)
        return DataLoader(samples, batch_size=self.batch_size, shuffle=True, drop_last=True)


def test_a_checkpoint_resumed_with_a_plain_dataloader_of_ones_own_trains_on(tmp_path):
    """The checkpoint holds the project's loader's position in its epoch; a data module whose
    loader takes none (a plain DataLoader) met Lightning's RuntimeError ("0 stateful loaders, but
    found 1 states") and a traceback. Now the rest of the epoch is drawn from the start of its
    order, as Lightning warns."""
    common = [*FAST, f"output_root={tmp_path}", "trainer.max_epochs=3"]
    mid_epoch = tmp_path / "mid-epoch.ckpt"
    run_train(*common, "run_id=first", *save_after_step(6, mid_epoch))
    own = [*common, "run_id=own", f"data._target_={__name__}.PlainLoaderData", f"ckpt_path={mid_epoch}"]
    resumed = run_train(*own, check=False)
    assert resumed.returncode == 0 and "Traceback" not in resumed.stderr, resumed.stderr
    assert "not resumable" in resumed.stderr  # Lightning's warning: the epoch's order starts over
    assert torch.load(tmp_path / "own" / "checkpoints" / "last.ckpt", weights_only=False)["global_step"] == 12


class PositionAtIterLoader(DataLoader):
    """Test-only: a loader that takes its saved position when its iterator is made, as torchdata's
    StatefulDataLoader does (the project's reads it at the first batch)."""

    handed_out = resume_at = 0

    def state_dict(self):
        return {"batches": self.handed_out}

    def load_state_dict(self, state):
        self.resume_at = state["batches"]

    def __iter__(self):
        skip, self.resume_at = self.resume_at, 0
        return self._counted(itertools.islice(super().__iter__(), skip, None), skip)

    def _counted(self, batches, skip):
        self.handed_out = skip
        for batch in batches:
            self.handed_out += 1
            yield batch


class PositionAtIterData(SyntheticDataModule):
    def train_dataloader(self):
        samples = TensorDataset(self.train_set.images, self.train_set.labels)
        return PositionAtIterLoader(samples, batch_size=self.batch_size, drop_last=True)  # the same order each epoch


def test_a_loader_that_takes_its_position_as_its_iterator_is_made_resumes_in_its_place(tmp_path):
    """Lightning makes the loader's iterator before on_train_start, where the project gives back
    the position: such a loader started its epoch over, unless its iterator is made again."""
    resumed_from_step_6_trains_the_unstopped_runs_batches(tmp_path, f"data._target_={__name__}.PositionAtIterData")


class SigtermAfterBatch(pl.Callback):
    """Test-only: SIGTERM to this process at the end of one training batch (counted over epochs)."""

    def __init__(self, batch: int):
        self.batch = batch

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.fit_loop.total_batch_idx == self.batch:
            os.kill(os.getpid(), signal.SIGTERM)


def test_a_stop_while_gradients_accumulate_saves_at_the_optimizer_step_and_resumes_to_the_same_weights(tmp_path):
    """With accumulate_grad_batches=2 a stop (or Slurm's requeue) after a batch that did not step
    the optimizer saved there: the gradients of that batch were lost, and the resumed epoch left
    the batch out. Now it saves after the next batch, the one that steps."""
    common = [*FAST, "model=autoencoder", f"output_root={tmp_path}", "trainer.max_epochs=2"]
    common += ["trainer.accumulate_grad_batches=2"]  # 4 batches an epoch: 2 optimizer steps
    run_train(*common, "run_id=whole")
    sigterm = [f"+callbacks.sigterm._target_={__name__}.SigtermAfterBatch", "+callbacks.sigterm.batch=4"]
    stopped = run_train(*common, "run_id=part", *sigterm, check=False)  # the first batch of epoch 1
    assert stopped.returncode == 143, stopped.stderr
    assert "SIGTERM: saving at the end of the next optimizer step" in stopped.stderr
    part = tmp_path / "part" / "checkpoints" / "last.ckpt"
    assert torch.load(part, weights_only=False)["global_step"] == 3, "saved between two optimizer steps"
    run_train(*common, "run_id=part", "ckpt_path=last")
    whole = torch.load(tmp_path / "whole" / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    resumed = torch.load(part, weights_only=False)["state_dict"]
    assert all(torch.equal(whole[name], resumed[name]) for name in whole), "a resumed run trained other weights"


@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_a_run_stopped_mid_epoch_and_resumed_ends_on_the_weights_of_an_unstopped_run(tmp_path, ranks):
    """The CNN's dropout draws from the random state, which Lightning does not save: a resumed run
    drew other masks and ended on other weights (callbacks/random_states.py saves every rank's)."""
    common = [*FAST, f"output_root={tmp_path}", "trainer.max_epochs=2"]  # the CNN: dropout 0.25
    if ranks > 1:  # the ranks agree on rank 0's signal within about a second: steps of 0.2 s, 8 an epoch
        common += ["strategy=ddp", "trainer.devices=2", "data.num_samples=512", "trainer.limit_train_batches=8"]
        common += record_saves(tmp_path / "saves.txt", seconds_per_step=0.2)
    steps = 2 * (8 if ranks > 1 else 4)
    run_train(*common, "run_id=whole")
    sigterm = [f"+callbacks.sigterm._target_={__name__}.SigtermAfterBatch", f"+callbacks.sigterm.batch={steps // 2}"]
    stopped = run_train(*common, "run_id=part", *sigterm, check=False)  # at epoch 1's first batch
    assert stopped.returncode == 143, stopped.stderr
    part = tmp_path / "part" / "checkpoints" / "last.ckpt"
    assert torch.load(part, weights_only=False)["global_step"] < steps, "stopped after the training's end"
    run_train(*common, "run_id=part", "ckpt_path=last")
    whole = torch.load(tmp_path / "whole" / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    resumed = torch.load(part, weights_only=False)["state_dict"]
    assert all(torch.equal(whole[name], resumed[name]) for name in whole), "a resumed run trained other weights"
