"""`python -m engine.cli` runs the `tandem` command."""

from .main import main

raise SystemExit(main())
