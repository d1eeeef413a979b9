"""The body of llama-server's `POST /infill`, as llama.vscode and llama.vim send it.

The sampling fields, `stop`, `stream`, `seed`, `draft` and `lookahead` are the completions
endpoints'; llama-server's own: `input_prefix`, `input_suffix` (text, or llama.cpp's mix of
texts and token ids), `input_extra` (chunks of other files), `prompt` (text typed after the
prefix), `n_predict` (-1: no limit; 0: read the prompt into the cache, write nothing),
`n_indent`, `t_max_predict_ms`, `response_fields` and `return_tokens`. Fields llama-server
reads and Tandem need not (`cache_prompt`: the prompt's cached prefix is always reused;
`samplers`; `id_slot`; `t_max_prompt_ms`, which llama-server ignores too) are accepted.
"""

from __future__ import annotations

from typing import Union

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, field_validator

from ..schemas import _Generation

MixedPrompt = Union[StrictStr, list[Union[StrictStr, StrictInt]]]


class ExtraChunkItem(BaseModel):
    """One `input_extra` chunk: {"filename": ..., "text": ...}."""

    model_config = ConfigDict(extra="allow")
    text: StrictStr
    filename: StrictStr = "tmp"


class InfillRequest(_Generation):
    input_prefix: MixedPrompt
    input_suffix: MixedPrompt
    input_extra: list[ExtraChunkItem] = Field(default_factory=list)
    prompt: StrictStr = ""
    n_predict: int | None = Field(None, ge=-1)
    n_indent: int = Field(0, ge=0)
    t_max_predict_ms: int = Field(0, ge=-1)
    response_fields: list[StrictStr] | None = None
    return_tokens: bool = False

    @field_validator("n")
    @classmethod
    def _one_answer(cls, v: int | None) -> int | None:
        if v not in (None, 1):
            raise ValueError(f"/infill writes one completion per request, got n={v}")
        return v

    @field_validator("input_prefix", "input_suffix")
    @classmethod
    def _ids(cls, v: MixedPrompt) -> MixedPrompt:
        if not isinstance(v, str):
            bad = next((x for x in v if isinstance(x, int) and x < 0), None)
            if bad is not None:
                raise ValueError(f"{bad} is not a token id (token ids are integers >= 0)")
        return v

    def answer_limit(self) -> int | None:
        """The answer's token limit: None for none (-1 or unset), 0 for prompt-only."""
        n = self.n_predict if self.n_predict is not None else self.max_tokens
        return None if n is None or n < 0 else n
