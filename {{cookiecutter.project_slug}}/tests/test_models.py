"""Every model trains on every dataset (Lightning's fast_dev_run: one batch of each)."""

import pytest
import torch

from tests.helpers import FAST, run_train, write_small_mnist


@pytest.mark.parametrize("model", ["cnn", "autoencoder"])
@pytest.mark.parametrize("data", ["synthetic", "mnist"])
def test_fast_dev_run(model, data, tmp_path):
    overrides = [
        f"model={model}",
        f"data={data}",
        "trainer.fast_dev_run=true",
        "logger=csv",
        f"output_root={tmp_path / 'outputs'}",
    ]
    if data == "mnist":
        root = write_small_mnist(tmp_path / "mnist")
        overrides += [f"data.root={root}", "data.download=false", "data.val_size=64", "data.batch_size=16"]
    else:
        overrides += ["data.num_samples=128", "data.batch_size=16"]
    result = run_train(*overrides)
    assert "fast_dev_run" in result.stdout + result.stderr


def test_precision_and_accumulation_switches(tmp_path):
    result = run_train(
        *FAST,
        "trainer.precision=bf16-mixed",
        "trainer.accumulate_grad_batches=2",
        "trainer.max_epochs=1",
        f"output_root={tmp_path}",
        "run_id=switches",
    )
    assert "Using bfloat16 Automatic Mixed Precision (AMP)" in result.stdout + result.stderr
    checkpoint = torch.load(tmp_path / "switches" / "checkpoints" / "last.ckpt", weights_only=False)
    assert checkpoint["global_step"] == 2  # 4 batches, one optimizer step per 2
