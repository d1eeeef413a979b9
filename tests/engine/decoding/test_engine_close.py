"""Closing an engine (or `engine.setup` of another model) while another thread is inside a
generation: the generation ends cleanly (cancelled, or `EngineClosedError`), the process lives.

Each case runs in a child process: a use-after-free in llama.cpp kills the process (SIGSEGV or
SIGABRT), which a test in this process could not report. The closes land at many points of
prompt reading, drafting and emitting, so a busy machine shifts them but never hides them all.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import random, sys, threading
    import engine
    from engine import Engine
    from engine.errors import TandemError

    target, draft, mode, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    prompt = " ".join(["the value of the list is"] * 120)  # several n_batch chunks to read
    rng = random.Random(5)
    outcomes = {}
    for i in range(rounds):
        if mode == "setup":
            eng = engine.setup(target, n_batch=16, n_ctx=2048, metrics_log=False, calibration=False)
        else:
            eng = Engine(target, n_batch=16, n_ctx=2048, metrics_log=False, calibration=False)
        kw = [{"draft_model": None}, {"draft_model": "lookup", "lookahead": 4},
              {"draft_model": draft, "lookahead": 3}][i % 3]
        seen = []

        def gen():
            try:
                r = eng.generate(prompt + f" {i}", max_tokens=40, **kw)
                seen.append(r.stats.finish_reason)
            except TandemError as e:
                seen.append(type(e).__name__)

        t = threading.Thread(target=gen)
        t.start()
        threading.Event().wait(rng.random() * 0.05)
        if mode == "setup":
            engine.setup(target, n_batch=16, n_ctx=2048, metrics_log=False, calibration=False)
        else:
            eng.close()
        t.join(60)
        assert not t.is_alive(), "the generation did not end after close"
        outcomes[seen[0]] = outcomes.get(seen[0], 0) + 1
    print("OK", sorted(outcomes.items()))
    """
)


@pytest.mark.parametrize("mode", ["close", "setup"])
def test_closing_mid_generation_never_crashes_the_process(tiny_target, tiny_draft, mode):
    r = subprocess.run([sys.executable, "-c", CHILD, str(tiny_target), str(tiny_draft), mode, "24"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    assert r.stdout.startswith("OK")
