"""Where a request's pictures go in its prompt, and the prompt's tokens with them in place.

A request carries its pictures beside the prompt; the prompt's text says where each goes
with a media marker (the server writes one per `image_url` part, in order). A prompt without
markers gets them before its text (a raw prompt) or before the text of its last user message
(chat), as llama.cpp's own tools place a picture given beside a question. The markers
become IMAGE_SLOT entries when the prompt is tokenised, and the target's projector puts
each picture's tokens there (`Projector.expand`).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ...documents.images import MEDIA_MARKER, ImageInput, decode_image
from ...errors import PromptError


def place_markers(prompt: Any, n_images: int) -> Any:
    """`prompt` (text or chat messages) with a marker for each picture: as given when it has
    exactly as many; markers added before the (last user) text when it has none. Token ids
    (their IMAGE_SLOTs already in place, as the server reads them) stay as they are."""
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
        return prompt
    if isinstance(prompt, str):
        have = prompt.count(MEDIA_MARKER)
        if have == 0:
            return MEDIA_MARKER * n_images + "\n" + prompt
        _check_count(have, n_images)
        return prompt
    messages = [dict(m) for m in prompt]
    have = sum(str(m.get("content") or "").count(MEDIA_MARKER) for m in messages)
    if have:
        _check_count(have, n_images)
        return messages
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users:
        raise PromptError("images go in a user message; this conversation has none")
    last = messages[users[-1]]
    last["content"] = MEDIA_MARKER * n_images + "\n" + str(last.get("content") or "")
    return messages


def _check_count(have: int, n_images: int) -> None:
    if have != n_images:
        raise PromptError(f"the prompt marks {have} place(s) for images but {n_images} were given")


def image_prompt(projector: Any, tokenize: Callable[[Any], list[int]], prompt: Any, images: Sequence[ImageInput],
                 target_name: str) -> tuple[list[int], list[Any]]:
    """The prompt's tokens (`tokenize`, markers to IMAGE_SLOTs) with each picture's tokens in
    its slot, and the pictures' spans: each picture decoded within its pixel limit, then
    encoded (once per content) by `projector`; a target without one refused in one line."""
    if projector is None:
        raise PromptError(image_refusal(target_name))
    tokens = tokenize(place_markers(prompt, len(images)))
    return projector.expand(tokens, [decode_image(im) for im in images])


def picture_tokens(projector: Any, images: Sequence[ImageInput], target_name: str) -> list[int]:
    """The prompt tokens each picture takes with `projector` (its image tokens and the text
    around them), each decoded within its pixel limit but not encoded, and counted once per
    content: what a chat with pictures is fitted to the context by before it is sent (the app
    counts its text with `tokens_for`). A target without a projector refused in one line."""
    if projector is None:
        raise PromptError(image_refusal(target_name))
    counted = [projector.counted(im.sha256) for im in images]
    return [n if n is not None else projector.image_tokens(decode_image(im)) for n, im in zip(counted, images)]


def image_refusal(target_name: str) -> str:
    """The one line for a picture sent to a target without a projector."""
    return (f"{target_name} reads text only: load it with its vision projector (--mmproj FILE, "
            "or an mmproj-*.gguf beside it) to send images")
