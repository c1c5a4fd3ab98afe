"""Strategies Lightning 2.x does not ship (Horovod), and helpers for the ones it does (FSDP2)."""
