"""Train a model. Examples:

python train.py                                    # this machine, defaults
python train.py experiment=smoke                   # a quick check on synthetic data
python train.py trainer.devices=2 strategy=ddp     # two processes (CPUs or GPUs)
python train.py strategy=deepspeed_stage_2 cluster=lumi
python train.py --help                             # every option group and choice
"""

import sys

import hydra
from omegaconf import DictConfig

from {{ cookiecutter.package_name }}.launch.environment import register_resolvers
from {{ cookiecutter.package_name }}.launch.errors import SetupError
from {{ cookiecutter.package_name }}.slurm.profiles import add_detected_cluster

register_resolvers()  # ${default_run_id:} etc., needed before Hydra reads the configs


@hydra.main(config_path="configs", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    # Imported here, not at the top: `--help` and `--cfg job` then never load torch.
    from {{ cookiecutter.package_name }}.run import run

    try:
        run(cfg)
    except SetupError as error:
        print(f"\nERROR: {error}", file=sys.stderr)
        sys.exit(2)
    end_process_group()


def end_process_group() -> None:
    # Lightning leaves it to the program under some strategies (DeepSpeed), and torch then
    # warns at exit that destroy_process_group() was not called.
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    # On a known cluster (SLURM_CLUSTER_NAME or the host name) its profile is the default.
    sys.argv[1:] = add_detected_cluster(sys.argv[1:])
    main()
