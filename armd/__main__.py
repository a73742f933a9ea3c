"""`python -m armd` runs the command-line interface."""

from armd.cli import main

raise SystemExit(main())
