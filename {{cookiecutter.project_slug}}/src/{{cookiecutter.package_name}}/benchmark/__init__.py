"""Throughput of this project against a plain PyTorch loop, and how it scales.

    python -m {{ cookiecutter.package_name }}.benchmark                   # 1 process, the default config
    python -m {{ cookiecutter.package_name }}.benchmark --processes 2 model=autoencoder data.batch_size=256
    python -m {{ cookiecutter.package_name }}.benchmark.scaling --max-processes 4

See docs/performance.md for what is measured and the figures.
"""
