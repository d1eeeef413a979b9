"""A target's vision projector (`mmproj`), run through llama.cpp's libmtmd.

The projector turns a picture into image embeddings the target reads in place of tokens.
Tandem reads them into the *same* `Context` the decoder verifies with (`Context.feed` with
the prompt's `ImageSpan`s), so the decoding after a picture is the ordinary speculative loop.

In a prompt's token list a picture is a run of `placeholder` tokens, one per image embedding
(one KV cell each), at the index its span records. Drafters see that list as it is: prompt
lookup and the suffix draft find nothing to copy in a run of one token, an MTP head pairs the
placeholder with the target's hidden state at each image position (so it drafts from the
target's state after the picture), and a text-only draft model reads the placeholder run as
text: its positions stay one per list entry, in step with the target's list, so its
common-prefix sync and catch-up reading work unchanged. Only the target sees the picture.

Qwen-VL projectors (M-RoPE) give a picture fewer positions than embeddings (a w x h grid
advances the position by max(w, h)); `Context` keeps the difference, so a token's position
is its index less the shifts of the pictures before it.

Each picture is encoded once per projector, by its content hash (`ImageCache`): the next turn
of a conversation, a regenerate or an edit re-reads the same picture without encoding it.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..documents.images import IMAGE_SLOT, MEDIA_MARKER, DecodedImage
from ..errors import DecodeError, ModelLoadError, PromptError, UnsupportedModelError
from .llama import Closing, Model, _log_callback, default_threads, log_tail, recent_log_errors

import llama_cpp  # noqa: E402

# Tokens vision families already use for a picture's positions; the first one the vocabulary
# holds as a single token stands in the list for each image embedding.
_PLACEHOLDERS = ("<|image_pad|>", "<image_soft_token>", "<|image|>", "<image>", "<img>")
_CACHE_IMAGES = 32  # encoded pictures kept per projector, at most
_CACHE_BYTES = 256 * 1024 * 1024  # and their embeddings' bytes (a 27B's 4096-token picture is 84 MB)


_logs_routed = False


def _mtmd() -> Any:
    """llama-cpp-python's libmtmd bindings, its log routed where llama.cpp's goes (`log_tail`)."""
    global _logs_routed
    try:
        from llama_cpp import mtmd_cpp
    except (ImportError, OSError, AttributeError) as e:
        raise UnsupportedModelError(f"this llama.cpp build has no libmtmd ({e}); reinstall with packaging/bootstrap.sh") from None
    if not _logs_routed:
        mtmd_cpp.mtmd_log_set(_log_callback, ctypes.c_void_p(0))
        mtmd_cpp.mtmd_helper_log_set(_log_callback, ctypes.c_void_p(0))
        _logs_routed = True
    return mtmd_cpp


class _Chunk:
    """An mtmd image chunk Tandem owns (freed with it): it knows the picture's grid and positions."""

    def __init__(self, ptr: Any):
        self.ptr = ptr

    def __del__(self) -> None:  # pragma: no cover - interpreter shutdown order varies
        try:
            if self.ptr:
                _mtmd().mtmd_input_chunk_free(self.ptr)
                self.ptr = None
        except Exception:
            pass


@dataclass(eq=False)
class EncodedImage:
    """A picture as the target reads it: the text mtmd puts around it, its embeddings, its positions."""

    key: str  # the content hash
    before: list[int]  # tokens mtmd writes before the picture (Qwen: <|vision_start|>)
    after: list[int]
    embd: np.ndarray = field(repr=False)  # (n_tokens, n_embd) float32
    n_pos: int  # positions the picture advances (max(w, h) on M-RoPE, else n_tokens)
    chunk: _Chunk = field(repr=False)
    projector: "Projector" = field(repr=False)

    @property
    def n_tokens(self) -> int:
        return len(self.embd)


@dataclass(eq=False)
class ImageSpan:
    """A picture inside a token list: `image.n_tokens` placeholder entries from `start`."""

    start: int
    image: EncodedImage

    @property
    def n_tokens(self) -> int:
        return self.image.n_tokens

    @property
    def end(self) -> int:
        return self.start + self.image.n_tokens

    @property
    def shift(self) -> int:
        """How many fewer positions than KV cells the picture takes."""
        return self.image.n_tokens - self.image.n_pos

    @property
    def key_id(self) -> int:
        """A negative id named by the picture's content: its cells in a state's key (prompt cache)."""
        return -1 - int(self.image.key[:7], 16)

    def same(self, other: "ImageSpan") -> bool:
        return self.start == other.start and self.image.key == other.image.key

    def decode(self, lctx: Any, pos0: int, n_batch: int, on_batch: Callable[[int, int], None] | None,
               seq: int = 0) -> int:
        """Read the embeddings into `lctx`'s sequence `seq` from position `pos0` (mtmd's helper:
        batches, M-RoPE positions, non-causal attention where the family wants it);
        `on_batch(offset, n)` after each batch. Returns llama.cpp's code (0: read)."""
        return self.image.projector.decode(self.image, lctx, pos0, n_batch, on_batch, seq)


class ImageCache:
    """Encoded pictures by content hash, the most recent kept (`_CACHE_IMAGES`, `_CACHE_BYTES`;
    the newest always, whatever its size)."""

    def __init__(self, size: int = _CACHE_IMAGES, max_bytes: int = _CACHE_BYTES):
        self.size, self.max_bytes = size, max_bytes
        self._items: OrderedDict[str, EncodedImage] = OrderedDict()
        self.encoded = 0  # how many encodes ran (tests: a picture is encoded once)

    def get(self, key: str) -> EncodedImage | None:
        hit = self._items.get(key)
        if hit is not None:
            self._items.move_to_end(key)
        return hit

    def put(self, image: EncodedImage) -> None:
        self._items[image.key] = image
        self._items.move_to_end(image.key)
        while len(self._items) > 1 and (len(self._items) > self.size
                                        or sum(e.embd.nbytes for e in self._items.values()) > self.max_bytes):
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()


class Projector(Closing):
    """A target's projector file loaded with libmtmd: pictures in, `ImageSpan`s out."""

    def __init__(self, model: Model, path: str | os.PathLike[str], *, n_threads: int | None = None,
                 use_gpu: bool = False, max_image_tokens: int | None = None, batch: int | None = None):
        """`max_image_tokens`: scale pictures down to at most this many image tokens (None: the
        family's own limit). `batch`: the target context's batch; a projector whose pictures are
        read with non-causal attention (Gemma 3, Gemma 4 but E2B/E4B) must read a picture in one
        batch (split, its cells could not see those of later batches), so its pictures are
        scaled down to it."""
        m = _mtmd()
        self.path = Path(path)
        if not self.path.is_file():
            raise ModelLoadError(f"{self.path}: no such projector file")
        self.model = model
        self._open(m, n_threads, use_gpu, max_image_tokens)
        self.non_causal = bool(m.mtmd_decode_use_non_causal(self._ctx, None))
        if self.non_causal and batch and not (max_image_tokens and max_image_tokens <= batch):
            m.mtmd_free(self._ctx)
            try:
                self._open(m, n_threads, use_gpu, batch)
            except ModelLoadError:  # below the family's smallest picture: each one is refused when read
                self._open(m, n_threads, use_gpu, max_image_tokens)
        self.batch = batch
        self.mrope = bool(m.mtmd_decode_use_mrope(self._ctx))
        self.n_embd = int(llama_cpp.llama_model_n_embd_inp(model._require_open()))
        self.placeholder = _placeholder(model)
        self.cache = ImageCache()
        self._counts: dict[str, int] = {}  # image_tokens of pictures not encoded yet, by content
        self._lock = threading.Lock()  # one encode at a time: mtmd's context holds one output

    def _open(self, m: Any, n_threads: int | None, use_gpu: bool, max_image_tokens: int | None) -> None:
        params = m.mtmd_context_params_default()
        params.use_gpu = bool(use_gpu)
        params.print_timings = False
        params.n_threads = n_threads or default_threads()
        params.warmup = False  # the first picture pays its own graph, not every load
        params.media_marker = MEDIA_MARKER.encode()
        if max_image_tokens:
            params.image_max_tokens = int(max_image_tokens)
        log_tail.clear()
        self._ctx = m.mtmd_init_from_file(os.fsencode(self.path), self.model._require_open(), params)
        if not self._ctx:
            detail = recent_log_errors() or "not a projector llama.cpp reads"
            raise ModelLoadError(f"{self.path.name} cannot be {self.model.path.name}'s projector ({detail})")
        if not m.mtmd_support_vision(self._ctx):
            self.close()
            raise UnsupportedModelError(f"{self.path.name} is an audio projector; Tandem sends it pictures only")

    def expand(self, tokens: Sequence[int], images: Sequence[DecodedImage]) -> tuple[list[int], list[ImageSpan]]:
        """`tokens` with each IMAGE_SLOT replaced by its picture's text and placeholder run, and
        the spans that say where the pictures are. The slots and `images` match in order."""
        slots = sum(1 for t in tokens if t == IMAGE_SLOT)
        if slots != len(images):
            raise PromptError(f"the prompt marks {slots} place(s) for images but {len(images)} were given")
        out: list[int] = []
        spans: list[ImageSpan] = []
        it = iter(images)
        for t in tokens:
            if t != IMAGE_SLOT:
                out.append(t)
                continue
            enc = self.encode(next(it))
            out += enc.before
            spans.append(ImageSpan(len(out), enc))
            out += [self.placeholder] * enc.n_tokens
            out += enc.after
        return out, spans

    def encode(self, image: DecodedImage) -> EncodedImage:
        """The picture's embeddings, from the cache when this projector encoded it before."""
        with self._lock:
            hit = self.cache.get(image.sha256)
            if hit is not None:
                return hit
            enc = self._encode(image)
            self.cache.put(enc)
            return enc

    def counted(self, sha256: str) -> int | None:
        """`image_tokens` of a picture counted or encoded before (None: not yet)."""
        with self._lock:
            hit = self.cache.get(sha256)
            return len(hit.before) + hit.n_tokens + len(hit.after) if hit is not None else self._counts.get(sha256)

    def image_tokens(self, image: DecodedImage) -> int:
        """How many prompt tokens the picture takes (its image tokens and the text mtmd puts
        around them), without encoding it: what a chat is fitted to the context by before it is
        sent. mtmd prepares the picture (scales it to its grid) but runs no projector."""
        with self._lock:
            hit = self.cache.get(image.sha256)
            if hit is not None:
                return len(hit.before) + hit.n_tokens + len(hit.after)
            if image.sha256 not in self._counts:
                m = _mtmd()
                chunks, bitmap, before, after, chunk = self._tokenize(image)
                try:
                    self._counts[image.sha256] = len(before) + int(m.mtmd_input_chunk_get_n_tokens(chunk)) + len(after)
                finally:
                    m.mtmd_input_chunks_free(chunks)
                    m.mtmd_bitmap_free(bitmap)
                while len(self._counts) > _CACHE_IMAGES * 8:
                    self._counts.pop(next(iter(self._counts)))
            return self._counts[image.sha256]

    def _tokenize(self, image: DecodedImage) -> tuple[Any, Any, list[int], list[int], Any]:
        """mtmd's chunks for the picture and its bitmap (the caller frees both), the text tokens
        before and after it, and its image chunk."""
        m = _mtmd()
        data = (ctypes.c_uint8 * len(image.rgb)).from_buffer_copy(image.rgb)
        bitmap = m.mtmd_bitmap_init(image.width, image.height, data)
        if not bitmap:
            raise DecodeError("libmtmd could not take the picture's pixels")
        chunks = m.mtmd_input_chunks_init()
        try:
            m.mtmd_bitmap_set_id(bitmap, image.sha256.encode())
            text = m.mtmd_input_text(MEDIA_MARKER.encode(), len(MEDIA_MARKER.encode()), False, True)
            bitmaps = (m.mtmd_bitmap_p_ctypes * 1)(bitmap)
            rc = m.mtmd_tokenize(self._ctx, chunks, ctypes.byref(text), bitmaps, 1)
            if rc != 0:
                raise DecodeError(f"libmtmd could not prepare the picture (code {rc})")
            before: list[int] = []
            after: list[int] = []
            chunk = None
            for i in range(m.mtmd_input_chunks_size(chunks)):
                c = m.mtmd_input_chunks_get(chunks, i)
                kind = m.mtmd_input_chunk_get_type(c)
                if kind == m.MTMD_INPUT_CHUNK_TYPE_TEXT:
                    n = ctypes.c_size_t(0)
                    ptr = m.mtmd_input_chunk_get_tokens_text(c, ctypes.byref(n))
                    (after if chunk is not None else before).extend(int(ptr[j]) for j in range(n.value))
                elif kind == m.MTMD_INPUT_CHUNK_TYPE_IMAGE and chunk is None:
                    chunk = c
                else:  # tiles or slices (LLaVA-1.6, MiniCPM-V, InternVL, Idefics3): not read yet
                    raise UnsupportedModelError(f"{self.path.name} cuts a picture into tiles; Tandem reads projectors "
                                                "that give one part a picture (Qwen2/2.5/3-VL, Qwen3.5, Gemma 3/4, ...)")
            if chunk is None:
                raise DecodeError("libmtmd made no image tokens for the picture")
            return chunks, bitmap, before, after, chunk
        except BaseException:
            m.mtmd_input_chunks_free(chunks)
            m.mtmd_bitmap_free(bitmap)
            raise

    def _encode(self, image: DecodedImage) -> EncodedImage:
        m = _mtmd()
        chunks, bitmap, before, after, chunk = self._tokenize(image)
        try:
            n_tokens = int(m.mtmd_input_chunk_get_n_tokens(chunk))
            if m.mtmd_encode_chunk(self._ctx, chunk) != 0:
                raise DecodeError(f"the projector could not encode the picture ({recent_log_errors() or 'no detail'})")
            out = m.mtmd_get_output_embd(self._ctx)
            embd = np.ctypeslib.as_array(out, shape=(n_tokens * self.n_embd,)).reshape(n_tokens, self.n_embd).copy()
            if not np.isfinite(embd).all():
                raise DecodeError(f"{self.path.name} encoded the picture to values that are not numbers")
            owned = _Chunk(m.mtmd_input_chunk_copy(chunk))
            self.cache.encoded += 1
            return EncodedImage(image.sha256, before, after, embd, int(m.mtmd_input_chunk_get_n_pos(chunk)), owned, self)
        finally:
            m.mtmd_input_chunks_free(chunks)
            m.mtmd_bitmap_free(bitmap)

    def decode(self, image: EncodedImage, lctx: Any, pos0: int, n_batch: int,
               on_batch: Callable[[int, int], None] | None, seq: int = 0) -> int:
        """The picture's embeddings into `lctx`'s sequence `seq` (a parallel slot's, or 0) from
        `pos0`, in decodes of their own: a llama_batch carries embeddings or token ids, not both.
        A picture read with non-causal attention goes in one batch, or is refused in one line."""
        n_cells = int(image.embd.shape[0])
        if self.non_causal and n_cells > n_batch:
            raise PromptError(f"this picture takes {n_cells} image tokens, which {self.path.name} reads in one batch, "
                              f"but the batch holds {n_batch}: raise n_batch (the batch size) or send a smaller picture")
        m = _mtmd()
        done = [0]
        failed: list[BaseException] = []

        def after(view: Any, _data: Any) -> int:
            n = int(view.contents.n_tokens)
            try:
                if on_batch is not None:
                    on_batch(done[0], n)
            except BaseException as e:  # never across the C frame
                failed.append(e)
                return 1
            done[0] += n
            return 0

        cb = m.mtmd_helper_post_decode_callback(after)
        new_pos = llama_cpp.llama_pos(0)
        embd = image.embd.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        rc = int(m.mtmd_helper_decode_image_chunk(self._ctx, lctx, image.chunk.ptr, embd, pos0, seq, n_batch,
                                                  ctypes.byref(new_pos), cb, None))
        if failed:
            raise failed[0]
        return rc

    def close(self) -> None:
        if getattr(self, "_ctx", None):
            self.cache.clear()
            _mtmd().mtmd_free(self._ctx)
            self._ctx = None


def _placeholder(model: Model) -> int:
    for text in _PLACEHOLDERS:
        ids = model.tokenize(text, add_special=False, parse_special=True)
        if len(ids) == 1:
            return ids[0]
    return 0
