"""Resuming from last.ckpt continues where the first run stopped."""

import torch

from tests.helpers import FAST, run_train


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
