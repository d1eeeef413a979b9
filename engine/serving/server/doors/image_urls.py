"""Pictures named by http(s) URL, fetched by the server only when it was started with
`--fetch-image-urls`.

Without the flag the server fetches nothing and an image URL is refused in one line (a
client's request must not make this machine reach into its network). With it, each URL in a
request's picture fields — OpenAI's `image_url`, the Responses API's `input_image`,
Anthropic's `{"type": "url"}` image source — is fetched before any route reads the body and
put in the body as the data: URI the APIs already take, so each API reads it as an inline
picture, with the same checks. Bounded like every input: MAX_IMAGES URLs per request,
MAX_IMAGE_BYTES per picture (counted while reading, whatever the server says), FETCH_SECONDS
for each, at most MAX_REDIRECTS redirects and only to http(s). It runs in a worker thread, so
a slow host never holds up the other requests. A URL that cannot be fetched is one 400 line
naming the URL and why.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Iterator

from starlette.concurrency import run_in_threadpool

from ....documents.images import FORMATS, MAX_IMAGE_BYTES, MAX_IMAGES, ImageError, image_format
from ..error_shapes import send_error
from .json_body import replaying

FETCH_SECONDS = 15.0  # one picture, connection to last byte
MAX_REDIRECTS = 3
_CHUNK = 64 * 1024


class _BadRedirect(Exception):
    """A redirect to a scheme other than http(s)."""


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follow at most MAX_REDIRECTS, and only to http(s) (not ftp: or file:)."""

    max_redirections = MAX_REDIRECTS

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001 - urllib's signature
        if not newurl.lower().startswith(("http://", "https://")):
            raise _BadRedirect(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_opener = urllib.request.build_opener(_Redirects)


def _short(url: str) -> str:
    return url if len(url) <= 100 else url[:97] + "..."


def fetch_image(url: str, *, max_bytes: int = MAX_IMAGE_BYTES, seconds: float = FETCH_SECONDS) -> bytes:
    """The picture at an http(s) URL, read within the byte and time bounds, its format one the
    projector reads; ImageError in one line naming the URL otherwise."""
    deadline = time.monotonic() + seconds
    request = urllib.request.Request(url, headers={"User-Agent": "Tandem (image fetch)", "Accept": "image/*"})
    try:
        with _opener.open(request, timeout=seconds) as response:
            declared = response.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise ImageError(f"{_short(url)}: {int(declared) / 1e6:.1f} MB; images are limited to "
                                 f"{max_bytes / 1e6:.0f} MB")
            chunks, size = [], 0
            while True:
                if time.monotonic() > deadline:
                    raise ImageError(f"{_short(url)}: not fetched within {seconds:.0f} s")
                chunk = response.read1(_CHUNK)  # what has arrived: a trickle still meets the deadline
                if not chunk:
                    break
                size += len(chunk)
                if size > max_bytes:
                    raise ImageError(f"{_short(url)}: more than {max_bytes / 1e6:.0f} MB; images are limited to that")
                chunks.append(chunk)
    except ImageError:
        raise
    except _BadRedirect as e:
        raise ImageError(f"{_short(url)}: redirected to {str(e)[:80]}, which is not http(s)") from None
    except urllib.error.HTTPError as e:
        if 300 <= e.code < 400:
            to = (e.headers.get("Location") or "") if e.headers is not None else ""
            if to and not to.lower().startswith(("http://", "https://", "/")):  # urllib refuses file: itself
                raise ImageError(f"{_short(url)}: redirected to {to[:80]}, which is not http(s)") from None
            raise ImageError(f"{_short(url)}: more than {MAX_REDIRECTS} redirects") from None
        raise ImageError(f"{_short(url)}: the host answered HTTP {e.code}") from None
    except urllib.error.URLError as e:
        raise ImageError(f"{_short(url)}: cannot be fetched ({getattr(e.reason, 'strerror', None) or e.reason})") \
            from None
    except (OSError, ValueError) as e:  # a timeout, a reset, a malformed URL
        raise ImageError(f"{_short(url)}: cannot be fetched ({str(e)[:80] or type(e).__name__})") from None
    data = b"".join(chunks)
    if image_format(data) not in FORMATS:
        raise ImageError(f"{_short(url)}: not a PNG, JPEG or WebP picture")
    return data


def _is_remote(url: Any) -> bool:
    return isinstance(url, str) and url[:8].lower().startswith(("http://", "https://"))


def _picture_fields(node: Any) -> Iterator[tuple[str, Callable[[str, str], None]]]:
    """(URL, put(mime, base64)) for every http(s) picture URL in a request body's known shapes."""
    if isinstance(node, list):
        for item in node:
            yield from _picture_fields(item)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind in ("image_url", "input_image"):
        field = node.get("image_url")
        if isinstance(field, dict) and _is_remote(field.get("url")):
            yield field["url"], lambda mime, b64, f=field: f.__setitem__("url", f"data:{mime};base64,{b64}")
        elif _is_remote(field):
            yield field, lambda mime, b64, n=node: n.__setitem__("image_url", f"data:{mime};base64,{b64}")
    elif kind == "image" and isinstance(node.get("source"), dict) and node["source"].get("type") == "url" \
            and _is_remote(node["source"].get("url")):
        yield node["source"]["url"], lambda mime, b64, n=node: n.__setitem__(
            "source", {"type": "base64", "media_type": mime, "data": b64})
    for value in node.values():
        if isinstance(value, (list, dict)):
            yield from _picture_fields(value)


def inline_image_urls(body: bytes, fetch: Callable[[str], bytes] = fetch_image) -> bytes | None:
    """The body with every http(s) picture URL replaced by the picture as a data: URI; None
    when it names none (or is not JSON: the route says what is wrong with it)."""
    if b"http" not in body:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    fields = list(_picture_fields(data))
    if not fields:
        return None
    if len(fields) > MAX_IMAGES:
        raise ImageError(f"{len(fields)} image URLs in one request; at most {MAX_IMAGES}")
    for url, put in fields:
        picture = fetch(url)
        put(FORMATS[image_format(picture)], base64.b64encode(picture).decode("ascii"))
    return json.dumps(data).encode()


class FetchImageUrls:
    """ASGI middleware (with --fetch-image-urls): a POST body's picture URLs fetched in a worker
    thread and inlined before the route reads it; a URL that fails is a 400 in the API's shape."""

    def __init__(self, app: Any, fetch: Callable[[str], bytes] = fetch_image):
        self.app, self.fetch = app, fetch

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            inlined = await run_in_threadpool(inline_image_urls, body, self.fetch)
        except ImageError as e:
            await send_error(scope, send, 400, str(e), code="invalid_image_url")
            return
        if inlined is not None:
            body = inlined
            scope = dict(scope, headers=[(k, str(len(body)).encode() if k == b"content-length" else v)
                                         for k, v in scope.get("headers", ())])
        await self.app(scope, replaying(body, receive), send)
