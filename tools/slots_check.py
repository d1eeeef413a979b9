"""Issue #48's Done-when, measured as a client sees it: `tandem serve --parallel N` (default 4)
on the default pair, in its own process.

    flock /tmp/cpu.lock python -m tools.slots_check --pair qwen2.5-coder-1.5b --repeat 3 \\
        --out docs/results/slots-check/

1. **An editor's /infill beside a streaming chat.** The same greedy `/infill` is timed alone,
   and again sent once a long streamed chat answer (up to `--chat-tokens`, 300) has begun;
   the ratio beside/alone per repetition (the issue: within 2x). The chat must still be
   streaming when the infill ends, or the pair does not count (said in the row).
2. **Four chats at once.** Four greedy chat requests sent one after another, then all at
   once: aggregate tokens/s (all tokens / first sent to last token) at once against one after
   another (the issue: at least 1.10x), and how many of the four texts are identical (at
   least 3 of 4; a text that parts is a near-tie of batched rounding or a defect).

Every measured phase starts a fresh server with `--no-history-draft`, so no request drafts
from an answer an earlier phase stored (the suffix drafter keeps past answers in memory too);
phases interleave, their order swapped each repetition; medians and ranges. Requests name no
draft: each gets the server's default (the pair's draft model under Auto), or `--draft`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from tools.load_test import Sent, stream_one
from tools.serve_process import served

INFILL = {"input_prefix": "import json\nfrom pathlib import Path\n\n\ndef load_settings(path: Path) -> dict:\n"
                          "    \"\"\"Read the settings file at `path`; a missing file gives the defaults.\"\"\"\n",
          "input_suffix": "\n\n\ndef save_settings(path: Path, settings: dict) -> None:\n"
                          "    path.write_text(json.dumps(settings, indent=2))\n",
          "n_predict": 64, "temperature": 0}
CHAT = ("Write a Python module for a small library system: classes Book, Member and Library, with "
        "methods to add books, register members, lend and return books, and list overdue loans. "
        "Give every method a docstring.")
FOUR = ["Write a Python function that checks whether a string is a palindrome, ignoring case and spaces.",
        "Explain the difference between a list and a tuple in Python, with an example of each.",
        "Write a SQL query that returns the ten customers with the highest total order value.",
        "Write a bash script that renames every .jpeg file in a folder to .jpg."]


@dataclass
class InfillPair:
    repeat: int
    alone_s: float
    beside_s: float
    chat_streaming: bool  # the chat was still streaming when the infill beside it ended
    same_text: bool

    @property
    def ratio(self) -> float:
        return self.beside_s / self.alone_s


@dataclass
class FourPair:
    repeat: int
    after_tok_s: float  # one after another: all tokens / (first sent -> last token)
    once_tok_s: float  # all four at once, likewise
    identical: int  # of 4: texts at once equal to the same prompt's text one after another
    errors: int

    @property
    def ratio(self) -> float:
        return self.once_tok_s / self.after_tok_s


def infill(http: Any, base: str, draft: str | None) -> tuple[float, str]:
    """One greedy /infill: (seconds from sent to answer, its text)."""
    body = dict(INFILL, **({"draft": draft} if draft else {}))
    t0 = time.perf_counter()
    r = http.post(base + "/infill", json=body)
    r.raise_for_status()
    return time.perf_counter() - t0, r.json().get("content", "")


def infill_beside_chat(http_factory: Callable[[], Any], base: str, draft: str | None, chat_tokens: int) -> tuple[float, str, bool]:
    """The infill sent once a long streamed chat has its first token: (its seconds, its text,
    whether the chat was still streaming when it ended)."""
    started, chat_done = threading.Event(), threading.Event()
    out: dict[str, Sent] = {}

    def chat() -> None:
        with http_factory() as http:
            out["chat"] = stream_one(http, base, "m", CHAT, chat_tokens, draft, 0, on_first=started.set)
        started.set()
        chat_done.set()

    t = threading.Thread(target=chat, daemon=True)
    t.start()
    started.wait()
    with http_factory() as http:
        seconds, text = infill(http, base, draft)
    streaming = not chat_done.is_set()
    t.join()
    if out["chat"].error:
        raise SystemExit(f"the chat beside the infill failed: {out['chat'].error}")
    return seconds, text, streaming


def four(http_factory: Callable[[], Any], base: str, draft: str | None, max_tokens: int, at_once: bool) -> list[Sent]:
    """The four prompts one after another (one client) or at once (four clients), each record
    in prompt order; times on one clock."""
    sent: list[Sent | None] = [None] * len(FOUR)

    def one(i: int) -> None:
        with http_factory() as http:
            sent[i] = stream_one(http, base, "m", FOUR[i], max_tokens, draft, i)

    if at_once:
        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(FOUR))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for i in range(len(FOUR)):
            one(i)
    return [s for s in sent if s is not None]


def warm_up(http_factory: Callable[[], Any], base: str) -> None:
    """A short chat that shares nothing with the measured requests (a fresh server's first
    request builds what it needs; the same request would leave its answer to draft from)."""
    with http_factory() as http:
        r = http.post(base + "/v1/chat/completions", json={"model": "m", "max_tokens": 4, "temperature": 0,
                                                          "messages": [{"role": "user", "content": "Hello"}]})
        r.raise_for_status()


def rate(sent: Sequence[Sent]) -> float:
    """All tokens over first sent -> last token, in tokens/s."""
    wall = max(s.end for s in sent) - min(s.start for s in sent)
    return sum(s.tokens for s in sent) / wall if wall > 0 else 0.0


def run(server: Callable[[], Any], repeat: int, draft: str | None, chat_tokens: int, max_tokens: int,
        log: Any = sys.stderr) -> tuple[list[InfillPair], list[FourPair]]:
    """Both checks, `repeat` times, each phase on a fresh server from `server()` (a context
    manager giving a base URL), the order of alone/beside and after/at-once swapped each time."""
    import httpx

    def client() -> Any:
        return httpx.Client(timeout=1800)

    infills, fours = [], []
    for rep in range(repeat):
        res: dict[str, Any] = {}
        for phase in (("alone", "beside") if rep % 2 == 0 else ("beside", "alone")):
            with server() as base:
                warm_up(client, base)
                if phase == "alone":
                    with client() as http:
                        res["alone"] = infill(http, base, draft)
                else:
                    res["beside"] = infill_beside_chat(client, base, draft, chat_tokens)
        pair = InfillPair(rep, res["alone"][0], res["beside"][0], res["beside"][2], res["alone"][1] == res["beside"][1])
        infills.append(pair)
        print(f"rep {rep + 1} infill: alone {pair.alone_s:.2f} s, beside a chat {pair.beside_s:.2f} s "
              f"({pair.ratio:.2f}x), chat still streaming {pair.chat_streaming}", file=log, flush=True)
        got: dict[bool, list[Sent]] = {}
        for at_once in ((False, True) if rep % 2 == 0 else (True, False)):
            with server() as base:
                warm_up(client, base)
                got[at_once] = four(client, base, draft, max_tokens, at_once)
        alone = {s.prompt: s.text for s in got[False]}
        pair4 = FourPair(rep, rate(got[False]), rate(got[True]),
                         sum(1 for s in got[True] if s.error is None and s.text == alone.get(s.prompt)),
                         sum(1 for s in got[False] + got[True] if s.error))
        fours.append(pair4)
        print(f"rep {rep + 1} four chats: one after another {pair4.after_tok_s:.2f} tok/s, at once "
              f"{pair4.once_tok_s:.2f} tok/s ({pair4.ratio:.2f}x), identical {pair4.identical}/4, "
              f"errors {pair4.errors}", file=log, flush=True)
    return infills, fours


def _spread(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def table(infills: Sequence[InfillPair], fours: Sequence[FourPair]) -> str:
    """Markdown: each repetition's figures, then the medians against the issue's bars."""
    lines = ["| repetition | /infill alone s | beside a chat s | ratio | chat still streaming | same infill text |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {p.repeat + 1} | {p.alone_s:.2f} | {p.beside_s:.2f} | {p.ratio:.2f}x | {p.chat_streaming} | "
              f"{p.same_text} |" for p in infills]
    lines += ["", "| repetition | one after another tok/s | at once tok/s | ratio | identical | errors |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {p.repeat + 1} | {p.after_tok_s:.2f} | {p.once_tok_s:.2f} | {p.ratio:.2f}x | {p.identical}/4 | "
              f"{p.errors} |" for p in fours]
    counted = [p.ratio for p in infills if p.chat_streaming]
    lines += ["", f"- /infill beside a streaming chat: {_spread(counted) if counted else 'no pair counted'} of its time "
                  f"alone (median, range; {len(counted)} of {len(infills)} pairs counted; the bar: at most 2x)",
              f"- four at once: {_spread([p.ratio for p in fours])} the aggregate tokens/s of one after another "
              f"(the bar: at least 1.10x); identical texts {min(p.identical for p in fours)}-"
              f"{max(p.identical for p in fours)} of 4 (the bar: at least 3)"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.slots_check", description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--pair", default=None, help="a catalog pair id (default: the catalog's default pair)")
    where.add_argument("--target", help="a target GGUF instead of a pair")
    ap.add_argument("--draft", default=None, help="the draft each request names (default: none named, the "
                                                  "server's default)")
    ap.add_argument("--serve-draft", default=None, help="the server's --draft (with --target)")
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=2048, help="context per slot")
    ap.add_argument("--chat-tokens", type=int, default=300)
    ap.add_argument("--max-tokens", type=int, default=128, help="per request of the four")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None, help="folder for results.json and table.md")
    args = ap.parse_args(argv)
    options = ["--target", args.target] if args.target else (["--pair", args.pair] if args.pair else [])
    if args.serve_draft:
        options += ["--draft", args.serve_draft]
    # "m": the model name the requests send, whatever the served id is
    options += ["--parallel", str(args.parallel), "--ctx", str(args.ctx), "--no-history-draft", "--alias", "m"]
    infills, fours = run(lambda: served(*options), args.repeat, args.draft, args.chat_tokens, args.max_tokens)
    md = table(infills, fours)
    print(md)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(
            {"command": " ".join(sys.argv), "serve": options, "infill": [asdict(p) for p in infills],
             "four": [asdict(p) for p in fours]}, indent=1))
        (args.out / "table.md").write_text(md + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
