"""Every model trains on every dataset (Lightning's fast_dev_run: one batch of each)."""

import pytest

from tests.helpers import run_train, write_small_mnist


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
