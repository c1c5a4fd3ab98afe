"""Throughput of this project against a plain PyTorch loop, and how it scales.

    python -m {{ cookiecutter.package_name }}.benchmark                   # 1 process, the default config
    python -m {{ cookiecutter.package_name }}.benchmark --processes 2 model=autoencoder data.batch_size=256
    python -m {{ cookiecutter.package_name }}.benchmark.scaling --max-processes 4

See docs/performance.md for what is measured and the figures.
"""


def check_synthetic_data(overrides: list[str], tool: str, sized_by: dict[str, str]) -> None:
    """The benchmarks that size their own synthetic data (benchmark.overhead, benchmark.epoch_end):
    another data set, or a size they set from their options, stops with one line (SetupError).
    `sized_by`: {data key: the option that sets it}."""
    from ..launch.errors import SetupError

    for override in overrides:
        key, _, value = override.lstrip("+~").partition("=")
        if key == "data" and value != "synthetic":
            raise SetupError(
                f"{override}: {tool} trains on synthetic data of the size it needs. Fix: leave out {override} "
                f"(python -m {__name__} takes data=mnist)"
            )
        if key in sized_by:
            raise SetupError(f"{override}: {tool} sets it from {sized_by[key]}. Fix: {sized_by[key]} instead")
