"""A tiny target whose greedy answer is a fixed script of texts, then the end of its turn, and
a draft of the same vocabulary: the tool-calling tests' model that always calls."""

from __future__ import annotations

from pathlib import Path

from engine.models.tinymodel import NORMAL, Vocab, make_vocab, write_model


def write_scripted_pair(folder: Path, script: list[str], *, name: str = "caller", draft_seed: int = 5,
                        **model_kw: object) -> tuple[Path, Path]:
    """(target, draft): each text in `script` becomes one token of its own, and the target's
    greedy chain after a newline runs through them and ends with <|im_end|>. `model_kw`
    (a chat_template, say) goes to both models."""
    base = make_vocab()
    vocab = Vocab(base.tokens + script, base.scores + [0.0] * len(script), base.types + [NORMAL] * len(script))
    ids = [vocab.byte(10)] + [len(base.tokens) + i for i in range(len(script))] + [vocab.id("<|im_end|>")]
    target = write_model(folder / f"{name}.gguf", vocab=vocab, chain={a: b for a, b in zip(ids, ids[1:])}, name=name,
                         **model_kw)  # type: ignore[arg-type]
    draft = write_model(folder / f"{name}-draft.gguf", vocab=vocab, seed=draft_seed, n_layer=1, name=f"{name}-draft",
                        **model_kw)  # type: ignore[arg-type]
    return target, draft
