"""`GET /metrics`: Prometheus counters for requests, tokens and speculation, one registry per app."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

from ...decoding.events import RunStats
from ...decoding.queue import GenerationQueue


class ServerMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, queue: GenerationQueue):
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
        Gauge("tandem_requests_running", "Generations running (0 or 1)", registry=r).set_function(
            lambda: 1 if queue.running is not None else 0)

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
