"""The tiny test models' vocabulary: an SPM-style token list llama.cpp tokenises like a real
one (specials, byte fallback, characters, word pieces), shared by every tiny architecture so
models of different families and seeds read the same texts as the same tokens."""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import gguf

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Token types in GGUF (llama.cpp's llama_token_type)
NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6

WORDS = [
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an",
    "def", "return", "if", "else", "for", "while", "print", "self", "import", "class", "value",
    "count", "total", "item", "items", "data", "result", "name", "list", "None", "True", "False",
]


# Fill-in-the-middle control tokens (Qwen2.5-Coder's texts), by GGUF key: `make_vocab(fim=True)`
# appends them and `write_model` writes `tokenizer.ggml.<key>_token_id` for those it holds.
FIM_TOKENS = {"fim_pre": "<|fim_prefix|>", "fim_suf": "<|fim_suffix|>", "fim_mid": "<|fim_middle|>",
              "fim_pad": "<|fim_pad|>", "fim_rep": "<|repo_name|>", "fim_sep": "<|file_sep|>"}


@dataclass
class Vocab:
    tokens: list[str]
    scores: list[float]
    types: list[int]

    def id(self, text: str) -> int:
        return self.tokens.index(text)

    def byte(self, b: int) -> int:
        return self.tokens.index(f"<0x{b:02X}>")


def make_vocab(extra_words: int = len(WORDS), size: int | None = None, fim: bool = False) -> Vocab:
    """SPM-style vocabulary: specials, 256 byte tokens, printable chars, '▁word' pieces;
    padded with filler pieces to `size` tokens (shape-realistic models need a real-sized
    output layer: Qwen's is 152k rows). `fim`: the FIM control tokens last (other ids unchanged)."""
    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    types = [UNKNOWN, CONTROL, CONTROL, CONTROL, CONTROL]
    scores = [0.0] * 5
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(BYTE)
        scores.append(0.0)
    seen = set(tokens)
    chars = [c for c in string.ascii_letters + string.digits + string.punctuation]
    for c in ["▁"] + chars:
        if c not in seen:
            tokens.append(c)
            types.append(NORMAL)
            scores.append(-100.0)
            seen.add(c)
    for i, w in enumerate(dict.fromkeys(WORDS[:extra_words])):
        for t in ("▁" + w, w):
            if t not in seen:
                tokens.append(t)
                types.append(NORMAL)
                scores.append(-1.0 - i * 0.01 - (0.5 if not t.startswith("▁") else 0.0))
                seen.add(t)
    if size is not None:
        for i in range(size - len(tokens)):
            tokens.append(f"▁x{i:06d}")
            types.append(NORMAL)
            scores.append(-50.0)
    if fim:
        tokens += list(FIM_TOKENS.values())
        types += [CONTROL] * len(FIM_TOKENS)
        scores += [0.0] * len(FIM_TOKENS)
    return Vocab(tokens, scores, types)


def write_tokenizer(w: "gguf.GGUFWriter", vocab: Vocab, chat_template: str | None = CHATML_TEMPLATE) -> None:
    """The vocabulary as llama.cpp reads it (SPM model, BOS added), with the FIM token ids it
    holds and the chat template, into a GGUF being written."""
    w.add_tokenizer_model("llama")
    w.add_token_list(vocab.tokens)
    w.add_token_scores(vocab.scores)
    w.add_token_types(vocab.types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    for key, text in FIM_TOKENS.items():
        if text in vocab.tokens:
            w.add_uint32(f"tokenizer.ggml.{key}_token_id", vocab.id(text))
    if chat_template:
        w.add_chat_template(chat_template)
