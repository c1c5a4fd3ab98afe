"""Hydra takes its launchers from the `hydra_plugins` package alone (and imports this module at
every start): here the sweep launcher of configs/hydra/launcher/slurm.yaml gets its name there.
Its code is in {{ cookiecutter.package_name }}/slurm/launcher.py."""

from {{ cookiecutter.package_name }}.slurm import launcher


class SlurmSweepLauncher(launcher.SlurmSweepLauncher):
    """Hydra's submitit launcher for Slurm, with honest ends."""
