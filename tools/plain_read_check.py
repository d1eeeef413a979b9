"""A document never read before, as a user meets it, with the target's plain twin reading it
(`auto`, the default: engine/llamacpp/plain_reader.py) and without (`never`), interleaved:
`tandem generate --attach DOC "question"` in a new process (Auto, the app's default; time to
first token from its stats, wall-clock from process start to exit), and with `--serve` a client
of `tandem serve` (its defaults: the parallel slots; time to first token as the client sees it).

    flock /tmp/cpu.lock python -m tools.plain_read_check --pair qwen2.5-coder-1.5b --repeat 3 [--serve] --out DIR

One data folder for the whole check keeps the machine's calibration (the twin's verdict is
measured by an untimed read of the first document first, as a machine in use has it), and its
prompt cache is emptied before every run: each run reads its document whole. Every run passes
`--no-history-draft`. The question asked is each document's first of the long documents suite
(`--suite`). Medians and ranges per mode; the ratio is `never` / `auto` per document and
repetition (above 1: the twin made it sooner). Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from tools.attach_wall import CONFIGS, Asked, generate, questions

MODES = ("never", "auto")


def _first_per_document(suite: str) -> list[Asked]:
    seen: dict[str, Asked] = {}
    for a in questions(suite):
        seen.setdefault(a.name, a)
    return list(seen.values())


def _served_ttft(where: Sequence[str], prompt: str, max_tokens: int) -> tuple[float, int, int]:
    """One server on the data folder, one streamed question: the client's time to first token,
    the prompt's tokens and how many of them came from the cache."""
    import httpx

    from tools.load_test import stream_one
    from tools.serve_process import served

    with httpx.Client(timeout=None) as http, served(*where, "--no-history-draft", "--any-model-name") as base:
        sent = stream_one(http, base, "m", prompt, max_tokens, None, 0)
    if sent.error or sent.ttft is None:
        raise SystemExit(f"a request failed: {sent.error or 'no token came back'}")
    return sent.ttft, sent.prompt_tokens or 0, sent.cached or 0


def measure(where: Sequence[str], asked: Sequence[Asked], repeat: int, max_tokens: int, serve: bool,
            log: Any = sys.stderr) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tandem-plain-read-") as tmp:
        folder, home = Path(tmp), Path(tmp) / "home"
        os.environ["TANDEM_HOME"] = str(home)
        try:
            os.environ["TANDEM_PLAIN_READING"] = "auto"
            generate(where, folder, asked[0], CONFIGS["target"], 1, str(home))  # the twin's verdict, untimed
            for rep in range(repeat):
                for i, a in enumerate(asked):
                    for mode in MODES if (rep + i) % 2 == 0 else reversed(MODES):
                        shutil.rmtree(home / "prompt-cache", ignore_errors=True)
                        os.environ["TANDEM_PLAIN_READING"] = mode
                        if serve:
                            prompt = f"Attached file `{a.name}`:\n\n```\n{a.text}\n```\n\n{a.question}"
                            ttft, tokens, cached = _served_ttft(where, prompt, max_tokens)
                            run = {"doc": a.name, "mode": mode, "rep": rep, "ttft_s": round(ttft, 3), "tokens": tokens,
                                   "cached": cached}
                        else:
                            wall, out = generate(where, folder, a, CONFIGS["auto"], max_tokens, str(home))
                            st = out["stats"]
                            run = {"doc": a.name, "mode": mode, "rep": rep, "ttft_s": round(st["time_to_first_token_s"], 3),
                                   "wall_s": round(wall, 3), "tokens": st["prompt_tokens"],
                                   "cached": st.get("cached_tokens") or 0, "text": out["text"]}
                        runs.append(run)
                        print(f"rep {rep + 1} {a.name} {mode}: first token {run['ttft_s']:.2f} s"
                              + (f", wall {run['wall_s']:.2f} s" if "wall_s" in run else ""), file=log, flush=True)
        finally:
            os.environ.pop("TANDEM_PLAIN_READING", None)
            os.environ.pop("TANDEM_HOME", None)
    return runs


def summary(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    by = {(r["doc"], r["rep"], r["mode"]): r for r in runs}
    pairs = [(by[(d, rep, "never")], r) for (d, rep, m), r in by.items() if m == "auto" and (d, rep, "never") in by]
    out: dict[str, Any] = {"runs": len(pairs), "prompt_tokens": statistics.median(r["tokens"] for _, r in pairs)}
    for key in ("ttft_s", "wall_s"):
        if all(key in r for _, r in pairs):
            ratio = [n[key] / a[key] for n, a in pairs]
            out[key] = {m: statistics.median(p[i][key] for p in pairs) for i, m in enumerate(MODES)}
            out[key + "_ratio"] = [statistics.median(ratio), min(ratio), max(ratio)]
    if all("text" in r for _, r in pairs):
        out["same_text"] = sum(n["text"] == a["text"] for n, a in pairs)
    return out


def table(s: dict[str, Any], serve: bool) -> str:
    lines = ["| measure | reading never (median s) | reading auto (median s) | never / auto (range) |", "|---|---|---|---|"]
    for key, name in (("ttft_s", "first token, client" if serve else "first token"), ("wall_s", "wall-clock, process")):
        if key in s:
            r = s[key + "_ratio"]
            lines.append(f"| {name} | {s[key]['never']:.2f} | {s[key]['auto']:.2f} | **{r[0]:.2f}x** ({r[1]:.2f}-{r[2]:.2f}) |")
    tail = f"\n\n{s['runs']} pairs, prompts of {s['prompt_tokens']:.0f} tokens (median)"
    if "same_text" in s:
        tail += f"; texts identical in {s['same_text']} of {s['runs']}"
    return "\n".join(lines) + tail


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.plain_read_check", description=__doc__.split("\n\n")[0])
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--pair")
    which.add_argument("--target")
    ap.add_argument("--suite", default="long_documents")
    ap.add_argument("--limit", type=int, default=None, help="the first N documents")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--serve", action="store_true", help="as a client of `tandem serve` sees it")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if a.repeat < 1 or a.max_tokens < 1:
        ap.error("--repeat and --max-tokens must be at least 1")
    where = ["--pair", a.pair] if a.pair else ["--target", a.target]
    asked = _first_per_document(a.suite)[: a.limit]
    runs = measure(where, asked, a.repeat, a.max_tokens, a.serve)
    s = summary(runs)
    md = table(s, a.serve)
    print(md)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "runs.json").write_text(json.dumps({"argv": list(argv or sys.argv[1:]), "runs": runs, "summary": s},
                                                    indent=1))
        (a.out / "summary.md").write_text(md + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
