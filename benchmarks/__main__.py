"""`python -m benchmarks [--json PATH] [NAME [options]]`: list the benchmarks, or run one (benchmarks/runner.py)."""

from benchmarks.runner import main

raise SystemExit(main())
