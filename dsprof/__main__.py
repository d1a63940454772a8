"""`python -m dsprof ...` runs the command-line interface (as the `dsprof` script does)."""

from dsprof.cli import main

raise SystemExit(main())
