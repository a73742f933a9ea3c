"""Subcommands of the `armd` CLI: each module defines ``register(subparsers)``, which adds its
parser(s) and sets ``func`` (``(args) -> int`` exit code) as a default."""

__all__: list[str] = []
