"""Train a model. Examples:

python train.py                                    # this machine, defaults
python train.py experiment=smoke                   # a quick check on synthetic data
python train.py trainer.devices=2 strategy=ddp     # two processes (CPUs or GPUs)
python train.py strategy=deepspeed_stage_2 cluster=lumi
python train.py resume=outputs/<id> trainer.max_epochs=20   # continue a run, with its config
python train.py --help                             # every option group and choice
"""

import errno
import os
import sys
from pathlib import Path

try:
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.errors import InstantiationException
    from hydra.types import RunMode
    from omegaconf import DictConfig

    from {{ cookiecutter.package_name }}.launch.command_line import check_command_line, stop
    from {{ cookiecutter.package_name }}.launch.environment import register_resolvers
    from {{ cookiecutter.package_name }}.launch.errors import (
        CheckpointNotWritten,
        SetupError,
        TrainingDiverged,
        refused_settings,
    )
    from {{ cookiecutter.package_name }}.launch.run_directory import (  # one per line: fits a package name of 30 letters
        discard_refused_start,
        resume_command,
        resume_overrides,
    )
    from {{ cookiecutter.package_name }}.slurm.profiles import add_detected_cluster
except KeyboardInterrupt:  # Ctrl-C in the first moments, while these load: as later, not a traceback
    print("\nStopped by Ctrl-C", file=sys.stderr)
    sys.exit(130)

register_resolvers()  # ${default_run_id:} etc., needed before Hydra reads the configs


@hydra.main(config_path="configs", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        # Imported here, not at the top: `--help` and `--cfg job` then never load torch.
        from {{ cookiecutter.package_name }}.run import run

        run(cfg)
    except SetupError as error:  # found once the machine is known: GPUs, launcher, packages, data
        discard_refused_start(cfg.output_dir)  # a new run's directory; a resume's record of its overrides
        stop(str(error))
    except InstantiationException as error:  # a class of the config refused its settings, before training
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        discard_refused_start(cfg.output_dir)
        stop(refused_settings(error))
    except KeyboardInterrupt:  # Ctrl-C before training began (once it has, Lightning and SaveOnStop handle it)
        discard_refused_start(cfg.output_dir)  # this start trained nothing: as if refused
        print("\nStopped by Ctrl-C before training began: nothing to save", file=sys.stderr)
        sys.exit(130)
    except TrainingDiverged as error:  # its checkpoints from before are kept
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            raise  # the sweep names the point as failed, and goes on with the others (a sweep of learning rates)
        stop(str(error), code=1)
    except (CheckpointNotWritten, OSError) as error:  # a full disk, a quota, a folder made read-only
        if isinstance(error, OSError) and error.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
            raise
        what = str(error)  # a checkpoint's own words; the run's earlier checkpoints are whole
        if isinstance(error, OSError):  # a logger's file
            what = f"{error.filename or cfg.output_dir} could not be written ({error.strerror})"
        resume = resume_command(Path(cfg.output_dir))
        stop(f"{what}. The checkpoints written before it are whole. Fix: free space (or write access), then {resume}",
             code=1)  # fmt: skip
    end_process_group()


def end_process_group() -> None:
    # Lightning leaves it to the program under some strategies (DeepSpeed), and torch then
    # warns at exit that destroy_process_group() was not called.
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def expand_resume(argv: list[str]) -> list[str]:
    """`resume=DIR`: the overrides that run was started with, the new ones on top."""
    try:
        return resume_overrides(argv)
    except SetupError as error:
        stop(str(error))


if __name__ == "__main__":
    try:
        sys.argv[1:] = expand_resume(sys.argv[1:])
        # On a known cluster (SLURM_CLUSTER_NAME or the host name) its profile is the default.
        sys.argv[1:] = add_detected_cluster(sys.argv[1:])
        check_command_line(sys.argv[1:])  # a wrong choice or value: one line, exit 2, nothing made
        main()
    except KeyboardInterrupt:  # Ctrl-C outside main's own handler: while the config is read and checked
        print("\nStopped by Ctrl-C", file=sys.stderr)
        sys.exit(130)
