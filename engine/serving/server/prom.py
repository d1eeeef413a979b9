"""`GET /metrics`: Prometheus counters for requests, tokens and speculation, one registry per app;
with parallel slots, each slot's too (busy, requests, tokens, accepted drafts)."""

from __future__ import annotations

from typing import Any, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ...decoding.events import RunStats
from ...decoding.queue import GenerationQueue


class ServerMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, queue: GenerationQueue, slots: Any = None):
        """`slots`: the server's SlotScheduler (None: one answer at a time)."""
        r = self.registry = CollectorRegistry()
        self.requests = Counter("tandem_requests", "HTTP requests answered, by endpoint and status code",
                                ["endpoint", "code"], registry=r)
        self.prompt_tokens = Counter("tandem_prompt_tokens", "Prompt tokens of finished generations", registry=r)
        self.tokens = Counter("tandem_tokens_generated", "Tokens generated", registry=r)
        self.drafted = Counter("tandem_draft_tokens", "Tokens proposed by the drafter", registry=r)
        self.accepted = Counter("tandem_draft_tokens_accepted", "Drafted tokens the target accepted", registry=r)
        self.steps = Counter("tandem_speculative_steps", "Decoder steps (one target pass each)", registry=r)
        self.embedding_tokens = Counter("tandem_embedding_tokens", "Input tokens embedded (/v1/embeddings)",
                                        registry=r)
        self.cancelled = Counter("tandem_generations_cancelled", "Generations stopped early (client gone)", registry=r)
        Gauge("tandem_requests_waiting", "Requests waiting for their turn", registry=r).set_function(lambda: queue.waiting)
        Gauge("tandem_requests_running", "Generations running (in parallel slots, up to their number)",
              registry=r).set_function(lambda: max(queue.running_side_by_side, 1 if queue.running is not None else 0))
        if slots is not None:
            r.register(_SlotCollector(slots))

    def observe(self, s: RunStats) -> None:
        self.prompt_tokens.inc(s.prompt_tokens)
        self.tokens.inc(s.generated_tokens)
        self.drafted.inc(s.drafted)
        self.accepted.inc(s.accepted)
        self.steps.inc(s.steps)
        if s.finish_reason == "cancelled":
            self.cancelled.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _SlotCollector:
    """Each parallel slot's figures, read from the scheduler when /metrics is asked."""

    def __init__(self, slots: Any):
        self.slots = slots

    def collect(self) -> Iterator[Any]:
        busy = GaugeMetricFamily("tandem_slot_busy", "1 while the slot answers a request", labels=["slot"])
        done = CounterMetricFamily("tandem_slot_requests", "Requests the slot answered to their end", labels=["slot"])
        tokens = CounterMetricFamily("tandem_slot_tokens_generated", "Tokens the slot generated", labels=["slot"])
        accepted = CounterMetricFamily("tandem_slot_draft_tokens_accepted", "Drafted tokens accepted in the slot",
                                       labels=["slot"])
        for i, (b, (n, t, a)) in enumerate(zip(self.slots.busy(), self.slots.counts())):
            busy.add_metric([str(i)], 1 if b else 0)
            done.add_metric([str(i)], n)
            tokens.add_metric([str(i)], t)
            accepted.add_metric([str(i)], a)
        yield from (busy, done, tokens, accepted)
