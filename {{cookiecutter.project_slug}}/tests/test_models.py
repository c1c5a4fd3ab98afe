"""Every model trains on every dataset (Lightning's fast_dev_run: one batch of each)."""

import pytest
import torch
from hydra import compose, initialize_config_dir
from torch.nn import functional as F

from {{ cookiecutter.package_name }}.launch.environment import register_resolvers
from {{ cookiecutter.package_name }}.run import run

from tests.helpers import FAST, PROJECT, run_train, write_small_mnist


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


@pytest.mark.parametrize(
    ("precision", "data"),
    [("bf16-true", "in_memory=true"), ("64-true", "in_memory=true"), ("bf16-true", "in_memory=false")],
)
def test_models_train_in_a_true_precision(precision, data, tmp_path):
    """The model's own dtype: the batch is normalised after Lightning's cast of it, so it is cast
    too (it stopped with "Input type (float) and bias type (c10::BFloat16) should be the same")."""
    register_resolvers()
    root = write_small_mnist(tmp_path / "mnist")
    overrides = ["data=mnist", f"data.root={root}", "data.download=false", "data.val_size=64", f"data.{data}"]
    overrides += ["trainer.accelerator=cpu", f"trainer.precision={precision}", "+trainer.max_steps=2"]
    overrides += ["trainer.limit_val_batches=1", "trainer.log_every_n_steps=1", "~callbacks.progress_bar"]
    overrides += ["logger=csv", f"output_dir={tmp_path}/run"]
    with initialize_config_dir(config_dir=str(PROJECT / "configs"), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    trainer = run(cfg)
    assert trainer.global_step == 2
    dtype = {"bf16-true": torch.bfloat16, "64-true": torch.float64}[precision]
    assert next(trainer.lightning_module.parameters()).dtype == dtype


@pytest.mark.parametrize("model", ["cnn", "autoencoder"])
def test_the_models_take_the_datas_image_shape_and_classes(model):
    """configs/model/*.yaml read them from the data's config: synthetic data of other images and
    classes trains without a matching model override (it stopped inside the first step)."""
    from hydra.utils import instantiate

    register_resolvers()
    overrides = [f"model={model}", "data=synthetic", "data.image_shape=[3,32,40]", "data.num_classes=20"]
    overrides += ["data.num_samples=64", "data.batch_size=16", "output_dir=/unused"]
    with initialize_config_dir(config_dir=str(PROJECT / "configs"), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    data, module = instantiate(cfg.data), instantiate(cfg.model)
    data.setup("fit")
    images, labels = data.on_after_batch_transfer(next(iter(data.train_dataloader())), 0)
    assert images.shape[1:] == (3, 32, 40)
    outputs = module(images)
    assert outputs.shape == ((len(labels), 20) if model == "cnn" else images.shape)
    loss = F.cross_entropy(outputs, labels) if model == "cnn" else F.mse_loss(outputs, images)  # the models' losses
    loss.backward()
