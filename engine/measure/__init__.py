"""Measure: how fast and how faithful speculation is, on this machine.

The benchmark over prompt suites (bench.py), the race of target alone against speculation
(racing.py), the draft optimiser (optimize.py), and the one wording of run statistics shared
by the CLI and the app (report.py).

May import: engine.decoding, engine.llamacpp, engine.models and the top-level helpers. Never
engine.serving, engine.cli or app.
"""
