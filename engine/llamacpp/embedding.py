"""Sentence embeddings from a loaded generation model: its last hidden states, mean-pooled
over the input's tokens and L2-normalised, as llama-server answers `/v1/embeddings` for a
generation model started with `--embeddings --pooling mean`.

An `EmbeddingContext` is a second llama.cpp context over the same weights with embeddings
on; the generation contexts (and their cached prompts) are never touched. It is created on
the first embeddings request, so chat alone costs nothing.

Why pool here instead of asking llama.cpp for LLAMA_POOLING_TYPE_MEAN: llama.cpp pools one
micro-batch at a time, so a pooled input must fit one micro-batch, and an embedding context
computes (and keeps) the vocabulary logits of every token of it: with the micro-batch as large
as the context, a 4096-token context of a 152k-token vocabulary asks for gigabytes before the
first input. Here the context reads an input in `n_batch` chunks (causal attention: a token's
hidden state does not depend on how the input was chunked), takes each token's hidden state
(LLAMA_POOLING_TYPE_NONE) and averages them: llama.cpp's mean (equal to 2e-5 within one
chunk; across chunks ggml's kernels for other batch sizes round differently, cosine 0.99998 or
closer), at the generation context's memory cost per chunk.

An embedding model (an encoder such as BERT or nomic-bert, which declares its own pooling in
`{arch}.pooling_type`) is pooled by llama.cpp instead, as llama-server pools it: its attention
is not causal, so an input is read in one micro-batch (the context's size, at most the model's
trained context), and such a model has no vocabulary head to make that costly. The Library
embeds its passages this way (engine/llamacpp/text_embedder.py); the server's /v1/embeddings
still serves only generation models (`embedding_refusal`).
"""

from __future__ import annotations

import ctypes
from typing import Callable, Sequence

import numpy as np

from ..errors import Cancelled, DecodeError, EmbeddingsUnsupported, ModelLoadError, TandemError
from .llama import Closing, Model, default_threads, free_context, log_tail, recent_log_errors
from .runtime import RuntimeParams

import llama_cpp  # noqa: E402  (after our imports, as in llama.py)

# Architectures whose attention is not causal (encoders): a chunked read would miss what later
# chunks see, and mean pooling over a generation model's states does not apply to them.
NON_CAUSAL = ("bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "jina-bert-v3", "modern-bert",
              "neo-bert", "eurobert", "t5encoder", "llada", "llada-moe", "dream")


def embedding_refusal(model: Model) -> str | None:
    """Why `model` cannot be mean-pooled here, or None when it can."""
    arch = model.architecture
    causal = model.header.get(f"{arch}.attention.causal")
    if model.has_encoder or arch in NON_CAUSAL or causal is False:
        return (f"{model.path.name} ({arch}) is not a causal generation model: Tandem mean-pools a "
                "generation model's hidden states, which does not apply to it; serve it with "
                "llama-server --embeddings instead")
    return None


# The poolings an embedding model may declare that give one vector per input (not RANK: a reranker's score).
_OWN_POOLINGS = (llama_cpp.LLAMA_POOLING_TYPE_MEAN, llama_cpp.LLAMA_POOLING_TYPE_CLS, llama_cpp.LLAMA_POOLING_TYPE_LAST)


def own_pooling(model: Model) -> int | None:
    """The pooling an embedding model that cannot be mean-pooled here declares for itself
    (`{arch}.pooling_type`: mean, CLS or last token), or None (a generation model, or none declared)."""
    if embedding_refusal(model) is None:
        return None
    declared = model.header.get(f"{model.architecture}.pooling_type")
    return int(declared) if isinstance(declared, int) and int(declared) in _OWN_POOLINGS else None


class EmbeddingContext(Closing):
    """A llama.cpp context with embeddings on, one input at a time, over a loaded model."""

    def __init__(self, model: Model, runtime: RuntimeParams | None = None):
        """Of `runtime` it uses n_ctx (the longest input), n_batch (tokens per chunk) and n_threads.
        An embedding model (`own_pooling`) reads each input in one batch of n_ctx tokens."""
        why = embedding_refusal(model)
        self.pooling = own_pooling(model)
        if why is not None and self.pooling is None:
            raise EmbeddingsUnsupported(why)
        rt = runtime or RuntimeParams()
        self.model = model
        threads = rt.n_threads or default_threads()
        params = llama_cpp.llama_context_default_params()
        n_ctx, n_batch = rt.n_ctx, rt.n_batch
        if self.pooling is not None:  # not causal: the whole input in one micro-batch, pooled by llama.cpp
            n_ctx = min(n_ctx, model.n_ctx_train) if model.n_ctx_train > 0 else n_ctx
            n_batch = n_ctx
        params.n_ctx, params.n_batch, params.n_ubatch, params.n_seq_max = n_ctx, n_batch, n_batch, 1
        params.n_threads = params.n_threads_batch = threads
        params.embeddings = True
        params.pooling_type = llama_cpp.LLAMA_POOLING_TYPE_NONE if self.pooling is None else self.pooling
        params.no_perf = True
        log_tail.clear()
        self._ctx = model.init_context(params)
        if not self._ctx:
            detail = recent_log_errors() or "out of memory?"
            raise ModelLoadError(f"{model.path}: could not create an embedding context of {rt.n_ctx} tokens ({detail})")
        self.n_ctx: int = min(n_ctx, int(llama_cpp.llama_n_ctx(self._ctx)))
        self.n_batch: int = min(n_batch, int(llama_cpp.llama_n_batch(self._ctx)))
        self.n_embd: int = model.n_embd
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self._batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)
        self._b_token = np.ctypeslib.as_array(self._batch.token, shape=(self.n_batch,))
        self._b_pos = np.ctypeslib.as_array(self._batch.pos, shape=(self.n_batch,))
        np.ctypeslib.as_array(self._batch.n_seq_id, shape=(self.n_batch,))[:] = 1
        np.ctypeslib.as_array(self._batch.logits, shape=(self.n_batch,))[:] = 1  # every token's state is read
        for i in range(self.n_batch):
            self._batch.seq_id[i][0] = 0

    def embed(self, tokens: Sequence[int], stop: Callable[[], bool] | None = None) -> np.ndarray:
        """The L2-normalised mean of the model's last hidden states over `tokens` (float32, n_embd).
        `stop()` is asked before each chunk: True ends the read with `Cancelled`."""
        n = len(tokens)
        if n == 0:
            raise TandemError("nothing to embed: the input has no tokens")
        if n > self.n_ctx:
            raise DecodeError(f"an input of {n} tokens does not fit the embedding context of {self.n_ctx}")
        if not self._ctx:
            raise ModelLoadError(f"{self.model.path}: the embedding context was freed")
        if self.pooling is not None:
            return self._pooled(tokens, stop)
        llama_cpp.llama_memory_clear(self._mem, True)
        total = np.zeros(self.n_embd, dtype=np.float64)
        try:
            for start in range(0, n, self.n_batch):
                if stop is not None and stop():
                    raise Cancelled("cancelled")
                total += self._chunk_sum(tokens[start:start + self.n_batch], start)
        finally:
            llama_cpp.llama_memory_clear(self._mem, True)
        mean = total / n
        norm = float(np.sqrt(np.dot(mean, mean)))
        return (mean / norm if norm > 0 else mean).astype(np.float32)

    def _pooled(self, tokens: Sequence[int], stop: Callable[[], bool] | None) -> np.ndarray:
        """An embedding model's own pooling over `tokens` in one batch, L2-normalised."""
        if stop is not None and stop():
            raise Cancelled("cancelled")
        if self._mem:  # an encoder keeps no cache; a causal model that declares its pooling does
            llama_cpp.llama_memory_clear(self._mem, True)
        self._decode(tokens, 0)
        ptr = llama_cpp.llama_get_embeddings_seq(self._ctx, 0)
        if not ptr:
            raise EmbeddingsUnsupported(f"{self.model.path.name}: llama.cpp gave no pooled embedding for this model")
        v = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(self.n_embd,))
        v = v.astype(np.float64)
        norm = float(np.sqrt(np.dot(v, v)))
        return (v / norm if norm > 0 else v).astype(np.float32)

    def _decode(self, chunk: Sequence[int], start: int) -> None:
        k = len(chunk)
        self._b_token[:k] = chunk
        self._b_pos[:k] = np.arange(start, start + k, dtype=np.int32)
        self._batch.n_tokens = k
        rc = llama_cpp.llama_decode(self._ctx, self._batch)
        if rc != 0:
            raise DecodeError(f"llama_decode failed with code {rc} while embedding ({recent_log_errors()})")

    def _chunk_sum(self, chunk: Sequence[int], start: int) -> np.ndarray:
        """Decode one chunk at positions start.. and return the sum of its tokens' hidden states."""
        k = len(chunk)
        self._decode(chunk, start)
        ptr = llama_cpp.llama_get_embeddings(self._ctx)
        if not ptr:
            raise EmbeddingsUnsupported(f"{self.model.path.name}: llama.cpp gave no hidden states for this model")
        rows = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(k, self.n_embd))
        return rows.sum(axis=0, dtype=np.float64)

    def close(self) -> None:
        if getattr(self, "_ctx", None):
            free_context(self._ctx, self._batch)
            self._ctx = None
