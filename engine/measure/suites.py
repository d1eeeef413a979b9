"""Prompt suites for the benchmark: the tuning suites in assets/suites/ and the held-out
ones in assets/suites/heldout/ (never used to tune anything; reported apart), or a file.

A suite line is one request, or a *run* of several requests sent in order on one engine
(`{"id", "requests": [...]}`): an agent's tool-call loop, one extraction after another, this
week's report after last week's. A drafter that learns from earlier answers (suffix) carries
what it learnt from one request of a run to the next.

The long-prompt suites (`long_*`: documents asked about, FIM with repository context, agent
sessions) are what users send most and where reading the prompt is most of the wait; their
prompts run to 2,000 tokens and more, so they are slow on a CPU and stay out of the default set
(`builtin_suites("long")` names them). A document question says its `kind` (quote, extract,
summary) so the report can give each apart; a FIM line's `fim` parts are laid out as `/infill`
lays them, for the engine's own target, when the benchmark starts (`with_fim_tokens`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..decoding.prompting.fim_layout import ExtraChunk, infill_tokens
from ..errors import TandemError
from ..resources import suites_dir

SUITES_DIR = suites_dir()


class BenchError(TandemError):
    """A benchmark that cannot run as asked (a bad suite, configuration or setting)."""


KINDS = ("quote", "extract", "summary")  # what a question about a document asks for


@dataclass(frozen=True)
class FimParts:
    """The text around an editor's cursor and the other files it sends with it."""

    prefix: str
    suffix: str
    extra: tuple[ExtraChunk, ...] = ()


@dataclass
class BenchPrompt:
    id: str
    prompt: Any  # str, a list of chat messages, or token ids (a FIM prompt laid out for the engine)
    chat: bool = True
    run: str | None = None  # the run of several requests this one belongs to; None: a run of its own
    request: int = 1  # its place in that run, from 1
    kind: str | None = None  # quote | extract | summary: what a question about a document asks for
    fim: FimParts | None = None  # a fill-in-the-middle request: laid out by with_fim_tokens


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
LONG = "long_"  # the long-prompt suites' names start so: not in the default set (slow on a CPU)
SETS = ("tuning", HELDOUT, "all", "long")


def is_long(name: str) -> bool:
    """True for a long-prompt suite, tuning ("long_documents") or held-out ("heldout/long_fim")."""
    return name.rsplit("/", 1)[-1].startswith(LONG)


def builtin_suites(which: str = "all") -> list[str]:
    """Tuning suites by name ("chat"), held-out ones as "heldout/chat"; which: tuning|heldout|all
    (the default set, without the long-prompt suites) or long (those alone, tuning then held-out)."""
    tuning = sorted(p.stem for p in SUITES_DIR.glob("*.jsonl"))
    heldout = sorted(f"{HELDOUT}/{p.stem}" for p in (SUITES_DIR / HELDOUT).glob("*.jsonl"))
    if which not in SETS:
        raise BenchError(f"unknown suite set {which!r}: {', '.join(SETS)}")
    if which == "long":
        return [n for n in tuning + heldout if is_long(n)]
    tuning, heldout = [n for n in tuning if not is_long(n)], [n for n in heldout if not is_long(n)]
    return tuning if which == "tuning" else heldout if which == HELDOUT else tuning + heldout


def every_builtin_suite() -> list[str]:
    """Every built-in suite: the default set, then the long-prompt suites."""
    return builtin_suites("all") + builtin_suites("long")


def listing() -> list[str]:
    """One line per built-in suite for `tandem bench --list`: name, set, prompts, and which are
    long (not run unless asked: --set long or --suite NAME)."""
    lines = []
    for name in every_builtin_suite():
        suite = load_suite(name)
        runs = len(suite.runs())
        size = f"{len(suite.prompts)} prompts" + (f" in {runs} runs" if suite.multi_request else "")
        kinds = sorted({p.kind for p in suite.prompts if p.kind}, key=KINDS.index)
        note = "long prompts, not in the default set" + (f"; kinds: {', '.join(kinds)}" if kinds else "") if is_long(name) else ""
        lines.append(f"{name:28s} {suite_set(name):8s} {size:22s} {note}".rstrip())
    return lines


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
        raise BenchError(f"unknown suite {name_or_path!r}: not a file, and not one of {', '.join(every_builtin_suite())}")
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
            if any(q.id == prompts[-1].id for q in prompts[:-1]):  # the report pairs runs by id
                raise BenchError(f"{where}: a second prompt with the id {prompts[-1].id!r}")
    if not prompts:
        raise BenchError(f"{p}: the suite has no prompts")
    return Suite(name, prompts)


def _request(obj: Any, where: str, default_id: str) -> BenchPrompt:
    """One request: {"prompt": text, "chat"?}, {"messages": [{role, content}, ...]} or
    {"fim": {prefix, suffix, extra?}}, optional "id" and "kind" (quote, extract or summary)."""
    if not isinstance(obj, dict):
        raise BenchError(f"{where}: a request must be an object with 'prompt', 'messages' or 'fim'")
    kind = obj.get("kind")
    if kind is not None and kind not in KINDS:
        raise BenchError(f"{where}: 'kind' must be one of {', '.join(KINDS)}, got {kind!r}")
    pid = str(obj.get("id", default_id))
    if "messages" in obj:
        msgs = obj["messages"]
        if not isinstance(msgs, list) or not all(isinstance(m, dict) and "role" in m and "content" in m for m in msgs):
            raise BenchError(f"{where}: 'messages' must be a list of {{role, content}}")
        return BenchPrompt(pid, msgs, True, kind=kind)
    if "prompt" in obj:
        return BenchPrompt(pid, str(obj["prompt"]), bool(obj.get("chat", True)), kind=kind)
    if "fim" in obj:
        return BenchPrompt(pid, None, False, kind=kind, fim=_fim_parts(obj["fim"], where))
    raise BenchError(f"{where}: needs 'prompt', 'messages' or 'fim'")


def _fim_parts(obj: Any, where: str) -> FimParts:
    """A line's "fim" object: {"prefix", "suffix", "extra"?: [{"filename", "text"}, ...]}."""
    if not isinstance(obj, dict) or not isinstance(obj.get("prefix"), str) or not isinstance(obj.get("suffix"), str):
        raise BenchError(f"{where}: 'fim' must be an object with text 'prefix' and 'suffix' (and optional 'extra')")
    extra = obj.get("extra", [])
    if not isinstance(extra, list) or not all(
            isinstance(e, dict) and isinstance(e.get("text"), str) and isinstance(e.get("filename", ""), str) for e in extra):
        raise BenchError(f"{where}: 'fim.extra' must be a list of {{\"filename\", \"text\"}}")
    return FimParts(obj["prefix"], obj["suffix"], tuple(ExtraChunk(e["text"], e.get("filename") or "tmp") for e in extra))


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


def with_fim_tokens(engine: Any, work: list[tuple[Suite, BenchPrompt]], max_tokens: int
                    ) -> tuple[list[tuple[Suite, BenchPrompt]], list[dict]]:
    """The (suite, prompt) pairs with each FIM prompt laid out as the token ids `/infill` would
    send this engine's target for the same parts (others as they were), and the FIM prompts a
    target without FIM tokens cannot take, as {suite, prompt, reason}."""
    fim_tokens = getattr(engine.target, "fim_tokens", None)
    fim = fim_tokens() if fim_tokens is not None else None
    keep, skipped = [], []
    for suite, prompt in work:
        if prompt.fim is None:
            keep.append((suite, prompt))
        elif fim is None:
            skipped.append({"suite": suite.name, "prompt": prompt.id,
                            "reason": "the target has no fill-in-the-middle tokens (use a FIM model such as Qwen2.5-Coder)"})
        else:
            parts = prompt.fim
            ids = infill_tokens(engine.target, fim, parts.prefix, parts.suffix, parts.extra,
                                n_ctx=engine.n_ctx, n_predict=max_tokens)
            keep.append((suite, replace(prompt, prompt=ids, chat=False)))
    return keep, skipped


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
