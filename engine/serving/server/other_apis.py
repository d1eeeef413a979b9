"""The APIs besides OpenAI's chat and text completions (Responses, Ollama, Anthropic), each
translated onto a `Completions` (and `Embeddings`) over the same engine, queue and metrics
as the OpenAI endpoints: one engine, one line of requests."""

from __future__ import annotations

import threading
from typing import Any, Callable

from fastapi import APIRouter

from ...decoding.queue import GenerationQueue
from .adapter import Via
from .anthropic_api import Messages, anthropic_router
from .config import ServedModel, ServerConfig
from .embeddings import Embeddings
from .generation import Completions
from .ollama_api import Ollama, ollama_router
from .ollama_models import OllamaModels
from .prom import ServerMetrics
from .responses_api import Responses, responses_router


def other_api_routers(served: ServedModel, config: ServerConfig, queue: GenerationQueue, metrics: ServerMetrics,
                      stopping: threading.Event, check_key: Callable[..., Any]) -> list[APIRouter]:
    """The routes of the Responses, Ollama and Anthropic APIs."""
    via = Via(Completions(served, config, queue, metrics, stopping))
    ollama = Ollama(via, Embeddings(served, config, queue, metrics, stopping), OllamaModels(via))
    return [responses_router(Responses(via), check_key), anthropic_router(Messages(via), config),
            ollama_router(ollama, check_key)]
