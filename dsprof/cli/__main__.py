"""`python -m dsprof.cli ...`: the command line, as `python -m dsprof` (what torchrun starts: `-m dsprof.cli`)."""

from dsprof.cli import main

raise SystemExit(main())
