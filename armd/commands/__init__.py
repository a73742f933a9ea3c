"""Subcommands of the `armd` CLI: each module defines ``register(subparsers)``, which adds its
parser(s) and sets ``func`` (``(args) -> int`` exit code) as a default. `armd.cli.COMMANDS` names
the module of every command and only the module of the command given is imported; a module imports
what its commands need when they run, so that its parsers cost nothing to build."""

__all__: list[str] = []
