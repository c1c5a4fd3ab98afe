"""Slurm: cluster profiles (configs/cluster/*.yaml) rendered into sbatch scripts.

    python -m {{ cookiecutter.package_name }}.slurm cluster=lumi strategy=deepspeed nodes=2   # print the script
    python -m {{ cookiecutter.package_name }}.slurm --write-scripts                           # re-render scripts/

Only the standard library and PyYAML are used here (no Hydra, no torch): cookiecutter's
post-generation hook renders scripts/ with this code, in the Python that runs cookiecutter itself.
"""
