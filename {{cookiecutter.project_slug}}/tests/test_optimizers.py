"""The models' optimizer: torch's AdamW, or DeepSpeed's CPU AdamW where DeepSpeed offloads the
optimizer (models/optimizers.py), and both take the same step."""

import pytest
import torch

from {{ cookiecutter.package_name }}.models.autoencoder import AutoEncoder, DenseAutoEncoder


class AttachedTrainer:
    """What configure_optimizers sees of the Trainer: its strategy."""

    def __init__(self, strategy):
        self.strategy = strategy


def small_model(strategy=None) -> AutoEncoder:
    torch.manual_seed(0)
    model = AutoEncoder(DenseAutoEncoder(input_size=16, hidden=8), lr=1e-2, weight_decay=0.1)
    if strategy is not None:
        model.trainer = AttachedTrainer(strategy)
    return model


def test_without_a_trainer_it_is_torch_adamw():
    """The benchmark's plain loop calls configure_optimizers outside a Trainer."""
    assert type(small_model().configure_optimizers()) is torch.optim.AdamW


def offload_strategy(**settings):
    pytest.importorskip("deepspeed")
    from pytorch_lightning.strategies import DeepSpeedStrategy

    return DeepSpeedStrategy(stage=3, **settings)


def test_deepspeed_without_offload_keeps_torch_adamw():
    assert type(small_model(offload_strategy()).configure_optimizers()) is torch.optim.AdamW


def test_offloaded_optimizer_is_deepspeed_cpu_adamw_with_the_same_step():
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    reference = small_model()
    offloaded = small_model(offload_strategy(offload_optimizer=True, offload_parameters=True))
    torch_adamw, cpu_adamw = reference.configure_optimizers(), offloaded.configure_optimizers()
    assert isinstance(cpu_adamw, DeepSpeedCPUAdam)

    images = torch.rand(4, 16)
    for model, optimizer in ((reference, torch_adamw), (offloaded, cpu_adamw)):
        for _ in range(3):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(images), images).backward()
            optimizer.step()
    for (name, expected), actual in zip(reference.named_parameters(), offloaded.parameters(), strict=True):
        torch.testing.assert_close(actual, expected, msg=f"{name}: DeepSpeed's CPU AdamW stepped differently")
