"""`python -m armd` runs the command-line interface."""

from armd.cli.main import main

raise SystemExit(main())
