"""Why a request's text in the slots can differ from its text alone (issue #48 item 2), in one
process: the chat prompts of `tools.slots_check` written greedily by `SlotScheduler` one after
another (passes of one row), then all at once (passes of N rows), and for each text that differs
the first token where the two part with the target's top-two logit margin there
(`Engine.first_divergence`, whose noise bound the suites use). A difference at a near-tie is
batched kernels rounding another way; one at a wide margin is a defect.

    flock /tmp/cpu.lock python -m tools.slots_identity --pair qwen2.5-coder-1.5b --max-tokens 128
    python -m tools.slots_identity --target T.gguf --no-repack    # llama.cpp's weight repacking off

`--no-repack` loads the target with `llama_model_params.use_extra_bufts = false` (llama.cpp's
`--no-repack`): on x86 CPUs the repacked Q4 weights are multiplied by one kernel below 4 rows and
another from 4 on, so it tells whether that kernel switch alone is the cause.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from tools.slots_check import FOUR


@dataclass
class Compared:
    prompt: int
    tokens: int  # the alone text's length in tokens
    identical: bool
    index: int | None = None  # the first token that differs
    margin: float | None = None  # the target's top-two logit margin there, alone
    near_tie: bool | None = None


def compare(eng: Any, prompts: Sequence[Sequence[int]], n_slots: int, max_tokens: int) -> list[Compared]:
    """Each prompt's (tokens') greedy text in `n_slots` slots (no draft) alone, then all at once."""
    from engine.decoding.events import DoneEvent
    from engine.decoding.request import GenerationRequest
    from engine.decoding.sampling.params import SamplingParams
    from engine.decoding.slots.scheduler import SlotScheduler

    requests = []
    for toks in prompts:
        requests.append(GenerationRequest(list(toks), lookahead=0, max_tokens=max_tokens, sampling=SamplingParams(temperature=0.0)))
    sched = SlotScheduler(eng.target, n_slots, runtime=replace(eng.runtime, n_ctx=eng.n_ctx * n_slots),
                          drafters={"none": lambda: None})

    def done(r: Any) -> Any:
        return [e for e in sched.stream(r.prompt, r, draft="none") if isinstance(e, DoneEvent)][0]

    try:
        alone = [done(r) for r in requests]
        together: list[Any] = [None] * len(requests)
        threads = [threading.Thread(target=lambda i=i: together.__setitem__(i, done(requests[i]))) for i in range(len(requests))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sched.close()
    out = []
    for i, (r, a, b) in enumerate(zip(requests, alone, together)):
        if a.tokens == b.tokens:
            out.append(Compared(i, len(a.tokens), True))
            continue
        div = eng.first_divergence(r.prompt, a.tokens, b.tokens)
        if div is None:  # one is the other's start: a limit, not a choice
            out.append(Compared(i, len(a.tokens), False))
        else:
            out.append(Compared(i, len(a.tokens), False, div.index, round(div.margin, 4), div.within_noise))
    return out


def table(rows: Sequence[Compared]) -> str:
    lines = ["| prompt | tokens alone | identical at once | first difference | margin there | near-tie |",
             "|---|---|---|---|---|---|"]
    for c in rows:
        lines.append(f"| {c.prompt} | {c.tokens} | {'yes' if c.identical else 'no'} | "
                     f"{'-' if c.index is None else c.index} | {'-' if c.margin is None else f'{c.margin:.3f}'} | "
                     f"{'-' if c.near_tie is None else ('yes' if c.near_tie else '**no**')} |")
    same = sum(c.identical for c in rows)
    lines.append(f"\n{same} of {len(rows)} identical.")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--pair", help="a catalog pair: its target is used")
    which.add_argument("--target", help="a target GGUF file")
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--n-ctx", type=int, default=1024, help="per slot")
    ap.add_argument("--no-repack", action="store_true", help="llama.cpp's weight repacking off")
    ap.add_argument("--out", type=Path, help="a folder for results.json and summary.md")
    a = ap.parse_args(argv)
    if a.slots < 1 or a.max_tokens < 1:
        ap.error("--slots and --max-tokens must be at least 1")
    from engine import Engine
    from engine.llamacpp.llama import Model

    target = a.target
    if a.pair:
        from engine.cli.common import resolve_pair

        target = str(resolve_pair(argparse.Namespace(pair=a.pair, target=None, draft=None))[0])
    # `--no-repack`: the target loaded here with llama.cpp's weight repacking off (`Model(repack=False)`)
    model = Model(target, repack=False) if a.no_repack else target
    eng = Engine(model, n_ctx=a.n_ctx, metrics_log=False, prompt_cache=False)
    if a.no_repack:
        print(f"weights repacked: {eng.target.repacked} tensors", file=sys.stderr)
    try:
        chats = [eng.tokens_for([{"role": "user", "content": FOUR[i % len(FOUR)]}]) for i in range(a.slots)]
        rows = compare(eng, chats, a.slots, a.max_tokens)
    finally:
        eng.close()
        if model is not target:  # an Engine does not close a Model it was given
            model.close()
    text = table(rows)
    print(text)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "results.json").write_text(json.dumps({"no_repack": a.no_repack, "slots": a.slots,
                                                        "max_tokens": a.max_tokens, "rows": [asdict(r) for r in rows]}, indent=1))
        (a.out / "summary.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
