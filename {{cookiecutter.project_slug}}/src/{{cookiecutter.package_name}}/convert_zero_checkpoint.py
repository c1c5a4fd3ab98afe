"""Turn a sharded DeepSpeed (ZeRO) checkpoint folder into one plain file:

    python -m {{ cookiecutter.package_name }}.convert_zero_checkpoint outputs/RUN/checkpoints/last.ckpt model.pt

The result needs no DeepSpeed and no GPUs. Its "state_dict" loads into the LightningModule:

    model = instantiate(cfg.model)
    model.load_state_dict(torch.load("model.pt", weights_only=False)["state_dict"])

The rest of the file is Lightning's checkpoint (epoch, hyperparameters, ...) without the
optimizer state, so `ImageClassifier.load_from_checkpoint("model.pt", net=...)` works too.
"""

import importlib.util
from pathlib import Path

from .launch.command_line import stop
from .launch.errors import OneLineParser, SetupError
from .launch.paths import unwritable


def convert(checkpoint_dir: Path, output_file: Path) -> Path:
    if not (checkpoint_dir / "latest").is_file():
        if not checkpoint_dir.exists():
            reason = "no such file or folder"
        elif checkpoint_dir.is_file():
            reason = "a file, not the folder of a DeepSpeed checkpoint"
        else:
            reason = "not a DeepSpeed checkpoint folder (it has no 'latest' file)"
        raise SetupError(
            f"{checkpoint_dir}: {reason}. Fix: the .ckpt folder a DeepSpeed run wrote, e.g. "
            "outputs/<run>/checkpoints/last.ckpt"
        )
    problem = unwritable(output_file, folder=False)
    if problem:  # before: a traceback from mkdir, after the conversion's imports
        raise SetupError(f"{output_file} {problem}. Fix: a file of yours, e.g. model.pt")
    if importlib.util.find_spec("deepspeed") is None:  # Lightning's converter imports it
        raise SetupError(
            "converting needs DeepSpeed, which is not installed here. Fix: DS_BUILD_OPS=0 pip install "
            "--no-build-isolation -e '.[deepspeed]' (README, DeepSpeed), or convert where the run trained"
        )
    from pytorch_lightning.utilities.deepspeed import convert_zero_checkpoint_to_fp32_state_dict

    output_file.parent.mkdir(parents=True, exist_ok=True)
    convert_zero_checkpoint_to_fp32_state_dict(checkpoint_dir, output_file)
    return output_file


def main(argv: list[str] | None = None) -> None:
    prog = f"python -m {__package__}.convert_zero_checkpoint"  # with -m, __name__ is __main__
    parser = OneLineParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint_dir", type=Path, help="the .ckpt folder DeepSpeed wrote")
    parser.add_argument("output_file", type=Path, nargs="?", help="default: <checkpoint_dir>.pt")
    args = parser.parse_args(argv)
    try:
        if not args.checkpoint_dir.name:  # '' or '.': no name to make <name>.pt from
            raise SetupError(
                f"{str(args.checkpoint_dir)!r}: not a checkpoint folder. Fix: e.g. outputs/<run>/checkpoints/last.ckpt"
            )
        convert(args.checkpoint_dir, args.output_file or args.checkpoint_dir.with_suffix(".pt"))
    except SetupError as error:
        stop(str(error))


if __name__ == "__main__":
    main()
