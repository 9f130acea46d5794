"""empeval's benchmarks: speed, memory and quality figures, each printed beside its goal in one format and written
to a JSON file (docs/measurements.md).

    .venv/bin/python -m benchmarks                       # the benchmarks, a line each
    .venv/bin/python -m benchmarks NAME [options]        # run one (NAME --help: its options)
    .venv/bin/python benchmarks/NAME.py [options]        # the same, run as a file

A benchmark reports each figure with `benchmarks.session.report(Figure(...))` (benchmarks/figures.py: the record,
its goal, ratio and verdict, and the line format); benchmarks/session.py prints the machine context once per run
and writes the JSON (benchmarks/results/ by default); benchmarks/runner.py finds and runs the scripts.
"""
