"""Prompt suites for the benchmark: the tuning suites in assets/suites/ and the held-out
ones in assets/suites/heldout/ (never used to tune anything; reported apart), or a file.

A suite line is one request, or a *run* of several requests sent in order on one engine
(`{"id", "requests": [...]}`): an agent's tool-call loop, one extraction after another, this
week's report after last week's. A drafter that learns from earlier answers (suffix) carries
what it learnt from one request of a run to the next."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TandemError
from ..resources import suites_dir

SUITES_DIR = suites_dir()


class BenchError(TandemError):
    """A benchmark that cannot run as asked (a bad suite, configuration or setting)."""


@dataclass
class BenchPrompt:
    id: str
    prompt: Any  # str, or a list of chat messages
    chat: bool = True
    run: str | None = None  # the run of several requests this one belongs to; None: a run of its own
    request: int = 1  # its place in that run, from 1


@dataclass
class Suite:
    name: str
    prompts: list[BenchPrompt]  # every request, runs in order

    @property
    def multi_request(self) -> bool:
        """True when the suite's items are runs of several requests."""
        return any(p.run is not None for p in self.prompts)

    def runs(self, limit: int | None = None) -> list[list[BenchPrompt]]:
        """The requests grouped by run, in order (a lone prompt is a run of one); `limit`: the first runs."""
        groups: list[list[BenchPrompt]] = []
        for p in self.prompts:
            if p.run is not None and groups and groups[-1][0].run == p.run:
                groups[-1].append(p)
            else:
                groups.append([p])
        return groups[:limit] if limit else groups


HELDOUT = "heldout"  # assets/suites/heldout/: never used to tune anything; reported apart


def builtin_suites(which: str = "all") -> list[str]:
    """Tuning suites by name ("chat"), held-out ones as "heldout/chat"; which: tuning|heldout|all."""
    tuning = sorted(p.stem for p in SUITES_DIR.glob("*.jsonl"))
    heldout = sorted(f"{HELDOUT}/{p.stem}" for p in (SUITES_DIR / HELDOUT).glob("*.jsonl"))
    if which == "tuning":
        return tuning
    if which == HELDOUT:
        return heldout
    if which != "all":
        raise BenchError(f"unknown suite set {which!r}: tuning, heldout or all")
    return tuning + heldout


def suite_set(name: str) -> str:
    """'heldout' for a held-out suite, else 'tuning'."""
    return HELDOUT if name.startswith(HELDOUT + "/") else "tuning"


def load_suite(name_or_path: str) -> Suite:
    """A built-in suite by name, or a file: one prompt per line (.txt), or JSON lines with
    {"prompt": ...} or {"messages": [...]} (optional "id", "chat"), or runs of several
    requests, {"id": ..., "requests": [{"prompt" or "messages": ...}, ...]}."""
    p = Path(name_or_path)
    name = p.stem
    builtin = SUITES_DIR / f"{name_or_path}.jsonl"
    if builtin.exists() and not name_or_path.endswith(".jsonl"):
        p = builtin
        name = name_or_path  # "chat" or "heldout/chat"
    elif not p.exists():
        raise BenchError(f"unknown suite {name_or_path!r}: not a file, and not one of {', '.join(builtin_suites())}")
    elif p.parent.name == HELDOUT:
        name = f"{HELDOUT}/{p.stem}"
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BenchError(f"{p}: cannot read suite ({e})") from None
    prompts: list[BenchPrompt] = []
    is_json = p.suffix in (".jsonl", ".json") or text.lstrip().startswith("{")
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        if not is_json:
            prompts.append(BenchPrompt(f"p{i + 1}", line.strip(), True))
            continue
        where = f"{p}:{i + 1}"
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise BenchError(f"{where}: not valid JSON ({e})") from None
        if not isinstance(obj, dict):
            raise BenchError(f"{where}: needs 'prompt', 'messages' or 'requests'")
        if "requests" in obj:
            run = _run_of_requests(obj, where, f"r{i + 1}")
            if any(q.run == run[0].run for q in prompts):
                raise BenchError(f"{where}: a second run with the id {run[0].run!r}")
            prompts += run
        else:
            prompts.append(_request(obj, where, f"p{i + 1}"))
    if not prompts:
        raise BenchError(f"{p}: the suite has no prompts")
    return Suite(name, prompts)


def _request(obj: Any, where: str, default_id: str) -> BenchPrompt:
    """One request: {"prompt": text, "chat"?} or {"messages": [{role, content}, ...]}, optional "id"."""
    if not isinstance(obj, dict):
        raise BenchError(f"{where}: a request must be an object with 'prompt' or 'messages'")
    if "messages" in obj:
        msgs = obj["messages"]
        if not isinstance(msgs, list) or not all(isinstance(m, dict) and "role" in m and "content" in m for m in msgs):
            raise BenchError(f"{where}: 'messages' must be a list of {{role, content}}")
        return BenchPrompt(str(obj.get("id", default_id)), msgs, True)
    if "prompt" in obj:
        return BenchPrompt(str(obj.get("id", default_id)), str(obj["prompt"]), bool(obj.get("chat", True)))
    raise BenchError(f"{where}: needs 'prompt' or 'messages'")


def _run_of_requests(obj: dict, where: str, default_id: str) -> list[BenchPrompt]:
    """{"id", "requests": [request, ...]}: the requests of one run, ids "RUN/1", "RUN/2", ..."""
    reqs = obj["requests"]
    if not isinstance(reqs, list) or not reqs:
        raise BenchError(f"{where}: 'requests' must be a non-empty list of requests")
    run = str(obj.get("id", default_id))
    out = []
    for j, r in enumerate(reqs):
        out.append(_request(r, f"{where}: request {j + 1}", ""))
        out[-1].id, out[-1].run, out[-1].request = f"{run}/{j + 1}", run, j + 1
    return out


def fitting_prompts(engine: Any, work: list[tuple[Suite, BenchPrompt]]) -> tuple[list[tuple[Suite, BenchPrompt]], list[dict]]:
    """The (suite, prompt) pairs whose prompt fits the engine's context, and the others as
    {suite, prompt, reason}: a model with a short context (or a small vocabulary, which makes
    more tokens of the same text) skips those prompts and measures the rest."""
    from ..errors import PromptTooLong

    keep, skipped = [], []
    cut: set[tuple[str, str]] = set()  # runs with a request that does not fit
    for suite, prompt in work:
        try:
            n = len(engine.tokens_for(prompt.prompt, chat=prompt.chat, limit=engine.n_ctx))
            reason = (f"the prompt is {n} tokens but the context holds {engine.n_ctx}"
                      if n >= engine.n_ctx else None)
        except PromptTooLong as e:
            reason = f"the prompt is at least {e.at_least} tokens but the context holds {engine.n_ctx}"
        if reason is None:
            keep.append((suite, prompt))
        else:
            skipped.append({"suite": suite.name, "prompt": prompt.id, "reason": reason})
            if prompt.run is not None:
                cut.add((suite.name, prompt.run))
    # A run is measured whole or not at all: without one request, the next would learn less.
    partial = [w for w in keep if w[1].run is not None and (w[0].name, w[1].run) in cut]
    keep = [w for w in keep if w not in partial]
    skipped += [{"suite": suite.name, "prompt": prompt.id, "reason": f"another request of run {prompt.run} does not fit"}
                for suite, prompt in partial]
    if work and not keep:
        raise BenchError(f"no prompt of these suites fits the context of {engine.n_ctx} tokens "
                         f"({skipped[0]['reason']}): raise --ctx")
    return keep, skipped
