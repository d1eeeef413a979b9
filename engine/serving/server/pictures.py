"""Pictures in requests: OpenAI's `image_url` parts as data: URIs, read and checked while the
body is validated (size and format, in one line naming the part), and the one line for a
target that cannot see. The other APIs (Anthropic image blocks, Ollama `images`, Responses
`input_image`) turn their forms into `image_url` parts with `data_uri` before validation.

The server fetches nothing: an http(s) URL is refused with the way to send the picture.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from ...documents.images import MAX_IMAGE_BYTES, ImageError, ImageInput, check_bytes
from .errors import ApiError

_DATA_URI = re.compile(r"data:(?P<type>[\w.+-]+/[\w.+-]+)?(?P<params>(;[\w.+-]+=[^;,]*)*)(?P<b64>;base64)?,", re.ASCII)


def data_uri(media_type: str | None, b64: str) -> str:
    """A data: URI of base64 `b64` (what Anthropic's and Ollama's forms carry)."""
    return f"data:{media_type or 'application/octet-stream'};base64,{b64}"


def image_from_url(value: Any, name: str = "image") -> ImageInput:
    """The picture an `image_url` part carries (`{"url": ...}` or the URL itself); ValueError
    in one line for a URL the server will not fetch, bad base64, too many bytes or a format
    Tandem does not read."""
    url = value.get("url") if isinstance(value, dict) else value
    if not isinstance(url, str) or not url:
        raise ValueError("image_url must hold a url")
    if url[:8].lower().startswith(("http://", "https://")):
        raise ValueError("image URLs are not fetched by this server: send the picture inline as a "
                         "data:image/...;base64 URI")
    m = _DATA_URI.match(url)
    if m is None or not m.group("b64"):
        raise ValueError("an image url must be a data:image/...;base64,... URI")
    payload = url[m.end():]
    if len(payload) // 4 * 3 > MAX_IMAGE_BYTES:
        raise ValueError(f"the picture is over {MAX_IMAGE_BYTES / 1e6:.0f} MB; images are limited to that")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the image's data: URI is not valid base64") from None
    image = ImageInput(data, name=name)
    try:
        check_bytes(image)
    except ImageError as e:
        raise ValueError(str(e)) from None
    return image


def split_pictures(content: list[Any], marker: str) -> tuple[list[Any], list[ImageInput]]:
    """A message's content parts with each `image_url` part replaced by a text part holding
    `marker`, and the pictures in order."""
    parts: list[Any] = []
    images: list[ImageInput] = []
    for j, part in enumerate(content):
        if isinstance(part, dict) and part.get("type") == "image_url":
            try:
                images.append(image_from_url(part.get("image_url"), f"content[{j}]"))
            except ValueError as e:
                raise ValueError(f"content[{j}].image_url: {e}") from None
            parts.append({"type": "text", "text": marker})
        else:
            parts.append(part)
    return parts, images


def checked_pictures(eng: Any, parallel: bool, images: tuple[ImageInput, ...]) -> tuple[ImageInput, ...]:
    """`images`, when this server can read them; a 400 in one line when it cannot (a target
    without a projector, or parallel slots, which read text)."""
    if not images:
        return images
    if getattr(eng, "projector", None) is None:
        from ...decoding.prompting.media import image_refusal

        name = eng.target.path.name if hasattr(eng, "target") else "the model"
        why = image_refusal(name).replace("load it with", "start the server with")
    elif parallel:
        why = "pictures are read with --parallel 1 only (the slots read text)"
    else:
        return images
    raise ApiError(400, why, param="messages", code="images_not_supported")


def image_part(url: Any, where: str) -> dict[str, Any]:
    """An `image_url` part for a picture another API sent, checked now so a refusal names that
    API's field (`where`)."""
    try:
        image_from_url(url)
    except ValueError as e:
        raise ApiError(400, f"{where}: {e}", param=where, code="invalid_value") from None
    return {"type": "image_url", "image_url": {"url": url}}


def content_of(items: list[Any], sep: str) -> Any:
    """Texts joined by `sep`, or, with pictures among them (`image_part`s), the chat API's
    content parts in the same order with `sep` between them."""
    if all(isinstance(t, str) for t in items):
        return sep.join(items)
    parts: list[Any] = []
    for i, t in enumerate(items):
        if i and sep:
            parts.append({"type": "text", "text": sep})
        parts.append({"type": "text", "text": t} if isinstance(t, str) else t)
    return parts
