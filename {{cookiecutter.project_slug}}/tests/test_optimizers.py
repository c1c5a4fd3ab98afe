"""The optimizer from the config (optim.py: torch's AdamW, fused on CUDA only), and the DeepSpeed
strategy's swap to DeepSpeed's CPU Adam under ZeRO-Offload (strategies/deepspeed.py), which
takes the same step."""

import io

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from {{ cookiecutter.package_name }}.launch.environment import register_resolvers
from {{ cookiecutter.package_name }}.models.autoencoder import AutoEncoder, DenseAutoEncoder
from {{ cookiecutter.package_name }}.optim import adamw

from tests.helpers import PROJECT, needs_cuda


def small_model(**optimizer) -> AutoEncoder:
    torch.manual_seed(0)
    settings = {"lr": 1e-2, "weight_decay": 0.1, **optimizer}
    return AutoEncoder(DenseAutoEncoder(image_shape=(1, 4, 4), hidden=8), optimizer=lambda p: adamw(p, **settings))


def test_the_config_builds_adamw_with_its_settings():
    register_resolvers()
    with initialize_config_dir(config_dir=str(PROJECT / "configs"), version_base="1.3"):
        cfg = compose("train", overrides=["model.optimizer.lr=0.02", "model.optimizer.weight_decay=0.5"])
    optimizer = instantiate(cfg.model).configure_optimizers()
    assert type(optimizer) is torch.optim.AdamW
    assert (optimizer.defaults["lr"], optimizer.defaults["weight_decay"]) == (0.02, 0.5)


def test_betas_and_eps_from_the_config_reach_adamw_and_its_checkpoint():
    register_resolvers()
    overrides = ["+model.optimizer.betas=[0.8,0.95]", "+model.optimizer.eps=1e-6"]
    with initialize_config_dir(config_dir=str(PROJECT / "configs"), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    optimizer = instantiate(cfg.model).configure_optimizers()
    assert (optimizer.defaults["betas"], optimizer.defaults["eps"]) == ((0.8, 0.95), 1e-6)
    saved = io.BytesIO()
    torch.save(optimizer.state_dict(), saved)  # as in a checkpoint, which Lightning loads with weights_only
    saved.seek(0)
    assert torch.load(saved, weights_only=True)["param_groups"][0]["betas"] == (0.8, 0.95)


def test_fused_auto_is_off_for_parameters_on_the_cpu():
    """The benchmark's plain loop calls configure_optimizers outside a Trainer: the same rule."""
    assert not small_model(fused="auto").configure_optimizers().defaults["fused"]
    assert small_model(fused=True).configure_optimizers().defaults["fused"]  # torch has a CPU kernel too


@needs_cuda
def test_fused_auto_is_on_for_parameters_on_a_gpu():
    model = small_model(fused="auto").cuda()
    assert model.configure_optimizers().defaults["fused"]


def deepspeed_strategy(**settings):
    pytest.importorskip("deepspeed")
    from {{ cookiecutter.package_name }}.strategies.deepspeed import DeepSpeedStrategy

    return DeepSpeedStrategy(stage=3, **settings)


def test_only_an_offloaded_optimizer_is_swapped():
    assert not deepspeed_strategy().offloads_optimizer
    assert deepspeed_strategy(offload_optimizer=True, offload_parameters=True).offloads_optimizer


def test_deepspeed_cpu_adam_takes_the_same_step_as_torch_adamw():
    pytest.importorskip("deepspeed")
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    from {{ cookiecutter.package_name }}.strategies.deepspeed import cpu_adam_like, is_torch_adam

    reference, offloaded = small_model(), small_model()
    torch_adamw = reference.configure_optimizers()
    assert is_torch_adam(torch_adamw)
    cpu_adamw = cpu_adam_like(offloaded.configure_optimizers())
    assert isinstance(cpu_adamw, DeepSpeedCPUAdam) and cpu_adamw.adam_w_mode

    images = torch.rand(4, 16)
    for model, optimizer in ((reference, torch_adamw), (offloaded, cpu_adamw)):
        for _ in range(3):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(images), images).backward()
            optimizer.step()
    for (name, expected), actual in zip(reference.named_parameters(), offloaded.parameters(), strict=True):
        torch.testing.assert_close(actual, expected, msg=f"{name}: DeepSpeed's CPU AdamW stepped differently")
