"""Several clients at once against an OpenAI-compatible server: aggregate tokens/s and time to
first token at 1, 2, 4 and 8 concurrent clients, each draft beside the others in one run.

    # Tandem on the default pair with 4 slots, a fresh `tandem serve` child for every round:
    python -m tools.load_test --pair qwen2.5-coder-1.5b --parallel 4 --clients 1,2,4,8 \\
        --drafts none,lookup,model --suite code_editing --max-tokens 128 --repeat 3 --out docs/results/load
    # a peer already listening (its drafts are its own), e.g. llama-cpp-python 0.3.36's server
    # (needs `pip install starlette-context`, which the venv leaves out):
    python -m llama_cpp.server --model TARGET.gguf --n_ctx 2048 --port 8081 &
    python -m tools.load_test --url http://127.0.0.1:8081 --model TARGET.gguf --clients 1,2,4,8 ...

A round is `clients` threads taking the round's prompts from one queue (each client sends its
next request when its last one ended), every request greedy and streamed. Aggregate tokens/s
= all completion tokens / (first request sent -> last token of the round); TTFT per request.
Rounds are interleaved: repetition r runs every (clients, draft) pair before repetition r + 1,
so load on the machine falls on all alike. With --pair or --target every round has a server of
its own (`tandem serve --no-history-draft` in a child process, as a client meets it): the suffix
drafter beside a draft model keeps past answers in memory, so a server kept across rounds would
draft a repeated prompt from its earlier answer. The text of every request is compared with the
same prompt's text at 1 client (identical or not: greedy output must not depend on the load).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import queue
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from tools.serve_process import served


@dataclass
class Sent:
    """One request of a round: when it was sent, its first and last token, what came back."""

    prompt: int
    start: float
    first: float | None = None
    end: float = 0.0
    tokens: int = 0
    text: str = ""
    error: str | None = None
    prompt_tokens: int | None = None  # from the usage chunk, where the server sends one
    cached: int | None = None  # of them, read from the server's prompt cache (prompt_tokens_details)

    @property
    def ttft(self) -> float | None:
        return None if self.first is None else self.first - self.start


@dataclass
class Round:
    clients: int
    draft: str
    repeat: int
    sent: list[Sent] = field(default_factory=list)

    @property
    def wall(self) -> float:
        return max(s.end for s in self.sent) - min(s.start for s in self.sent)

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.sent)

    @property
    def rate(self) -> float:
        return self.tokens / self.wall if self.wall > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        ttfts = sorted(s.ttft for s in self.sent if s.ttft is not None)
        return {"clients": self.clients, "draft": self.draft, "repeat": self.repeat, "requests": len(self.sent),
                "errors": sum(1 for s in self.sent if s.error), "tokens": self.tokens, "wall_s": round(self.wall, 3),
                "tokens_per_s": round(self.rate, 3), "ttft_p50_s": _pct(ttfts, 50), "ttft_p95_s": _pct(ttfts, 95)}


def _pct(values: Sequence[float], q: int) -> float | None:
    if not values:
        return None
    i = min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))
    return round(values[i], 3)


def stream_one(http: Any, url: str, model: str, prompt: Any, max_tokens: int, draft: str | None, index: int,
               on_first: Callable[[], None] | None = None) -> Sent:
    """One greedy streamed chat request; tokens from the usage chunk (else one per content chunk).
    `on_first` is called at its first content token (another request may then be sent beside it)."""
    messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
    body: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0,
                            "stream": True, "stream_options": {"include_usage": True}}
    if draft is not None:
        body["draft"], body["lookahead"] = draft, "auto"
    sent = Sent(index, time.perf_counter())
    chunks, usage, finish = 0, None, None
    parts: list[str] = []
    try:
        with http.stream("POST", url + "/v1/chat/completions", json=body) as r:
            if r.status_code != 200:
                r.read()
                sent.error = f"HTTP {r.status_code}: {r.text[:200]}"
                return sent
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                usage = chunk.get("usage") or usage
                for choice in chunk.get("choices") or []:
                    finish = choice.get("finish_reason") or finish
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        if sent.first is None:
                            sent.first = time.perf_counter()
                            if on_first is not None:
                                on_first()
                        parts.append(piece)
                        chunks += 1
    except Exception as e:  # noqa: BLE001 - a failed request is counted, the round goes on
        sent.error = f"{type(e).__name__}: {e}"
    sent.end = time.perf_counter()
    if sent.error is None and finish is None:  # a 200 whose answer stopped unsaid: lost, not an answer
        sent.error = f"the stream ended without a finish_reason after {chunks} content chunks"
    sent.text = "".join(parts)
    sent.tokens = int(usage["completion_tokens"]) if usage and "completion_tokens" in usage else chunks
    if usage:
        sent.prompt_tokens = usage.get("prompt_tokens")
        sent.cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    return sent


def run_round(url: str, model: str, prompts: Sequence[Any], clients: int, draft: str | None, max_tokens: int,
              repeat: int = 0, timeout: float = 600.0) -> Round:
    """`clients` threads send `prompts` (each once) from a shared queue; the round's record."""
    import httpx

    todo: "queue.SimpleQueue[int]" = queue.SimpleQueue()
    for i in range(len(prompts)):
        todo.put(i)
    rnd = Round(clients, draft or "server's own", repeat)
    lock = threading.Lock()

    def client() -> None:
        with httpx.Client(timeout=timeout) as http:
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                s = stream_one(http, url, model, prompts[i], max_tokens, draft, i)
                with lock:
                    rnd.sent.append(s)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rnd.sent.sort(key=lambda s: s.prompt)
    return rnd


def identical_to_alone(rounds: Sequence[Round]) -> dict[str, dict[str, int]]:
    """Per (clients, draft): how many texts equal the same prompt's text at 1 client, same draft
    and repetition (greedy output must not depend on what runs beside it)."""
    alone = {(r.draft, r.repeat): {s.prompt: s.text for s in r.sent} for r in rounds if r.clients == 1}
    out: dict[str, dict[str, int]] = {}
    for r in rounds:
        ref = alone.get((r.draft, r.repeat))
        if ref is None:
            continue
        cell = out.setdefault(f"{r.clients}/{r.draft}", {"identical": 0, "compared": 0})
        for s in r.sent:
            if s.error is None and s.prompt in ref:
                cell["compared"] += 1
                cell["identical"] += int(s.text == ref[s.prompt])
    return out


def table(rounds: Sequence[Round]) -> str:
    """Markdown: per clients and draft, medians over repetitions (ranges beside), and the ratio
    of aggregate tokens/s to the first draft's (the baseline, e.g. none) at the same clients."""
    cells: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in rounds:
        cells.setdefault((r.clients, r.draft), []).append(r.summary())
    drafts = list(dict.fromkeys(r.draft for r in rounds))
    same = identical_to_alone(rounds)
    lines = ["| clients | draft | tokens/s (median, range) | vs " + drafts[0] + " | TTFT p50 s | TTFT p95 s | "
             "identical to 1 client | errors |", "|---|---|---|---|---|---|---|---|"]
    for (clients, draft), rows in sorted(cells.items(), key=lambda kv: (kv[0][0], drafts.index(kv[0][1]))):
        rates = [x["tokens_per_s"] for x in rows]
        base = cells.get((clients, drafts[0]))
        ratio = "" if base is None else f"{statistics.median(rates) / statistics.median(x['tokens_per_s'] for x in base):.2f}x"
        p50, p95 = _median_s(x["ttft_p50_s"] for x in rows), _median_s(x["ttft_p95_s"] for x in rows)
        ident = same.get(f"{clients}/{draft}", {})
        lines.append(f"| {clients} | {draft} | {statistics.median(rates):.2f} ({min(rates):.2f}-{max(rates):.2f}) | "
                     f"{ratio} | {p50} | {p95} | {ident.get('identical', '-')}/{ident.get('compared', '-')} | "
                     f"{sum(x['errors'] for x in rows)} |")
    return "\n".join(lines)


def _median_s(values: Iterable[float | None]) -> str:
    """The median of the repetitions' times, to the hundredth of a second ("-": none measured)."""
    got = [v for v in values if v is not None]
    return f"{statistics.median(got):.2f}" if got else "-"


def run(url: str | Callable[[], Any], model: str, prompts: Sequence[Any], clients: Sequence[int],
        drafts: Sequence[str | None], max_tokens: int, repeat: int, log: Any = sys.stderr) -> list[Round]:
    """Every (clients, draft) round, `repeat` times, interleaved. `url`: a server's, or a factory
    of fresh servers (a context manager giving a URL), one per round."""
    rounds = []
    for rep in range(repeat):
        for c in clients:
            for d in drafts:
                with (contextlib.nullcontext(url) if isinstance(url, str) else url()) as base:
                    rnd = run_round(base, model, prompts, c, d, max_tokens, rep)
                print(f"rep {rep + 1} clients {c} draft {rnd.draft}: {rnd.rate:.2f} tok/s, wall {rnd.wall:.1f} s",
                      file=log, flush=True)
                rounds.append(rnd)
    return rounds


def _prompts(suite: str, limit: int) -> list[Any]:
    """The suite's chat and completion prompts (not FIM token layouts), at most `limit`."""
    from engine.measure.suites import load_suite

    return [p.prompt for p in load_suite(suite).prompts if p.chat and p.fim is None][:limit]


def serve_options(pair: str | None, target: str | None, draft: str | None, parallel: int, n_ctx: int) -> list[str]:
    """`tandem serve`'s options for a round's server: the pair (its draft model served, so
    "model" is a draft requests may name) or a target with `draft` (default lookup), `parallel`
    slots of `n_ctx` each, no stored answers, answering to "m"."""
    where = ["--pair", pair] if pair else ["--target", str(target), "--draft", draft or "lookup"]
    return [*where, "--parallel", str(parallel), "--ctx", str(n_ctx), "--no-history-draft", "--alias", "m",
            "--log-level", "warning"]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.load_test", description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--pair", help="start Tandem's server on this catalog pair (its draft model served), a "
                                      "child process per round")
    where.add_argument("--target", help="start Tandem's server on this GGUF, a child process per round")
    where.add_argument("--url", help="a server already listening (a peer): its drafts are its own")
    ap.add_argument("--model", default="m", help="the model name sent to --url (default m)")
    ap.add_argument("--serve-draft", default=None, help="with --target: the server's --draft (default lookup)")
    ap.add_argument("--parallel", type=int, default=4, help="slots of Tandem's server (default 4)")
    ap.add_argument("--ctx", type=int, default=2048, help="context per slot (default 2048)")
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--drafts", default="none,lookup", help="Tandem's per-request drafts (ignored with --url)")
    ap.add_argument("--suite", default="code_editing")
    ap.add_argument("--limit", type=int, default=8, help="prompts per round (default 8)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None, help="folder for rounds.json and table.md")
    args = ap.parse_args(argv)
    clients = [int(c) for c in args.clients.split(",")]
    prompts = _prompts(args.suite, args.limit)
    if args.pair or args.target:
        options = serve_options(args.pair, args.target, args.serve_draft, args.parallel, args.ctx)
        server: str | Callable[[], Any] = lambda: served(*options)
        drafts: list[str | None] = list(args.drafts.split(","))
        model = "m"
    else:
        server, drafts, model = args.url.rstrip("/"), [None], args.model
    rounds = run(server, model, prompts, clients, drafts, args.max_tokens, args.repeat)
    md = table(rounds)
    print(md)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "rounds.json").write_text(json.dumps(
            {"command": " ".join(sys.argv), "rounds": [{**r.summary(), "sent": [asdict(s) for s in r.sent]} for r in rounds]},
            indent=1))
        (args.out / "table.md").write_text(md + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
