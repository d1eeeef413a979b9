"""Development scripts, not shipped in the wheel: baselines, the GPU probe, the lookup replay,
the server and GUI benchmarks, the README's screenshots. Run each with `python -m tools.NAME`
from a checkout.

May import: engine and app (they measure them); nothing in engine/ or app/ imports tools.
"""
