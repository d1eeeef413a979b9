"""Pictures attached to a prompt: checked by bytes, format and pixels before they are decoded.

A screenshot pasted into a chat or sent to the server is untrusted input: a 40 KB PNG can
claim 100 000 x 100 000 pixels and take gigabytes to decode. So the bytes are bounded first,
the format is read from its signature (PNG, JPEG, WebP; anything else refused in one line),
the size from the header (Pillow opens lazily), and only then are the pixels decoded, to
RGB, under Pillow's decompression-bomb guard with our own, lower, pixel limit. The content
hash names the picture: the projector encodes the same picture once (engine/llamacpp/vision.py).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..errors import TandemError

MAX_IMAGE_BYTES = 20 * 1024 * 1024  # a phone photo is 3-8 MB; a scanned page at 300 dpi under 20
MAX_IMAGE_PIXELS = 50_000_000  # about 8000 x 6000; the projector scales every picture down anyway
MAX_IMAGES = 16  # per request
# Where a picture sits in a prompt's text (mtmd's default marker), and what stands for it in the
# prompt's tokens until the projector puts its image tokens there.
MEDIA_MARKER = "<__media__>"
IMAGE_SLOT = -1
FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp"}

_SIGNATURES = ((b"\x89PNG\r\n\x1a\n", "PNG"), (b"\xff\xd8\xff", "JPEG"), (b"GIF8", "GIF"), (b"BM", "BMP"),
               (b"II*\x00", "TIFF"), (b"MM\x00*", "TIFF"), (b"%PDF", "PDF"))


class ImageError(TandemError):
    """A picture that cannot be sent: too big, of another format, or damaged."""


@dataclass(frozen=True)
class ImageInput:
    """One picture of a request: its bytes as sent, and the sha256 that names it."""

    data: bytes = field(repr=False)
    sha256: str = ""
    name: str = "image"  # how a message refers to it (a file name, "image 2")

    def __post_init__(self) -> None:
        if not isinstance(self.data, (bytes, bytearray)):
            raise ImageError(f"{self.name}: an image must be bytes, not {type(self.data).__name__}")
        if not self.sha256:
            object.__setattr__(self, "sha256", hashlib.sha256(self.data).hexdigest())


@dataclass(frozen=True)
class DecodedImage:
    """A checked picture's pixels: `rgb` is width * height * 3 bytes, row after row."""

    rgb: bytes = field(repr=False)
    width: int
    height: int
    format: str
    sha256: str


_DATA_URI = re.compile(r"data:(?P<type>[\w.+-]+/[\w.+-]+)?(?P<params>(;[\w.+-]+=[^;,]*)*)(?P<b64>;base64)?,", re.ASCII)


def image_from_url(url: object, name: str = "image") -> ImageInput:
    """The picture a data:...;base64 URI carries, its bytes and format checked; ImageError in
    one line for a URL Tandem will not fetch (http: nothing is fetched), bad base64, too many
    bytes or a format Tandem does not read."""
    if not isinstance(url, str) or not url:
        raise ImageError("an image needs a url")
    if url[:8].lower().startswith(("http://", "https://")):
        raise ImageError("image URLs are not fetched by this server: send the picture inline as a "
                         "data:image/...;base64 URI (or start the server with --fetch-image-urls)")
    m = _DATA_URI.match(url)
    if m is None or not m.group("b64"):
        raise ImageError("an image url must be a data:image/...;base64,... URI")
    payload = url[m.end():]
    if len(payload) // 4 * 3 > MAX_IMAGE_BYTES:
        raise ImageError(f"the picture is over {MAX_IMAGE_BYTES / 1e6:.0f} MB; images are limited to that")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("the image's data: URI is not valid base64") from None
    image = ImageInput(data, name=name)
    check_bytes(image)
    return image


def image_format(data: bytes) -> str:
    """The format the bytes' signature names ("PNG", "JPEG", "WEBP", or another's name, or "")."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    for sig, name in _SIGNATURES:
        if data.startswith(sig):
            return name
    return ""


def check_images(images: object, *, max_images: int = MAX_IMAGES) -> tuple[ImageInput, ...]:
    """`images` (ImageInput or bytes) as a tuple of ImageInput, their bytes and formats checked
    (not yet decoded); ImageError in one line on the first that cannot be sent."""
    if images is None:
        return ()
    if isinstance(images, (bytes, bytearray, ImageInput)) or not isinstance(images, (list, tuple)):
        raise ImageError("images must be a list of pictures (ImageInput or bytes)")
    if len(images) > max_images:
        raise ImageError(f"{len(images)} images in one request; at most {max_images}")
    out = []
    for i, im in enumerate(images, 1):
        im = im if isinstance(im, ImageInput) else ImageInput(bytes(im) if isinstance(im, (bytes, bytearray)) else im,
                                                               name=f"image {i}")
        check_bytes(im)
        out.append(im)
    return tuple(out)


def check_bytes(image: ImageInput, *, max_bytes: int = MAX_IMAGE_BYTES) -> str:
    """The picture's format, once its size and signature are acceptable; ImageError otherwise."""
    n = len(image.data)
    if n == 0:
        raise ImageError(f"{image.name} is empty")
    if n > max_bytes:
        raise ImageError(f"{image.name} is {n / 1e6:.1f} MB; images are limited to {max_bytes / 1e6:.0f} MB")
    fmt = image_format(image.data)
    if fmt not in FORMATS:
        what = f"a {fmt} file" if fmt else "not an image Tandem reads"
        raise ImageError(f"{image.name} is {what}; send PNG, JPEG or WebP")
    return fmt


def _reason(e: BaseException) -> str:
    """Pillow's complaint without the object reprs it names ("<_io.BytesIO object at 0x...>")."""
    return re.sub(r"\s*<[^<>]*object at 0x[0-9a-f]+>", "", str(e))[:80].strip() or type(e).__name__


@contextmanager
def _opened(image: ImageInput, max_bytes: int, max_pixels: int) -> Iterator[tuple[Any, str, int, int]]:
    """(Pillow's image, format, width, height) after the byte, format and pixel checks, with only
    the header read so far, under the decompression-bomb guard; Pillow's errors become one line."""
    fmt = check_bytes(image, max_bytes=max_bytes)
    try:
        from PIL import Image
    except ImportError:
        raise ImageError("reading images needs Pillow: pip install 'tandem-studio[vision]'") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(image.data), formats=[fmt]) as im:
                w, h = im.size
                if w <= 0 or h <= 0:
                    raise ImageError(f"{image.name} has no pixels ({w} x {h})")
                if w * h > max_pixels:
                    raise ImageError(f"{image.name} is {w} x {h} pixels; images are limited to "
                                     f"{max_pixels / 1e6:.0f} megapixels")
                yield im, fmt, w, h
    except ImageError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ImageError(f"{image.name} claims more pixels than an image may have") from None
    except (OSError, ValueError, SyntaxError, EOFError) as e:
        raise ImageError(f"{image.name} is a damaged {fmt} file ({_reason(e)})") from None


def image_size(image: ImageInput, *, max_pixels: int = MAX_IMAGE_PIXELS, max_bytes: int = MAX_IMAGE_BYTES) -> tuple[int, int]:
    """(width, height) from the header alone, after the byte and format checks and within the
    pixel limit: what a picture held for later (the app's attachments, a chat archive) is
    checked by before it is kept; ImageError in one line otherwise. No pixel is decoded."""
    with _opened(image, max_bytes, max_pixels) as (_, _, w, h):
        return w, h


def decode_image(image: ImageInput, *, max_pixels: int = MAX_IMAGE_PIXELS,
                 max_bytes: int = MAX_IMAGE_BYTES) -> DecodedImage:
    """The picture's RGB pixels (transparency flattened onto white), after the byte, format and
    pixel checks; ImageError in one line when any fails or the file is damaged."""
    with _opened(image, max_bytes, max_pixels) as (im, fmt, w, h):
        from PIL import Image  # _opened said it in one line if Pillow is missing

        im.seek(0)  # the first frame of an animation
        if im.mode in ("RGBA", "LA", "P", "PA"):
            rgba = im.convert("RGBA")
            rgb = Image.new("RGB", rgba.size, (255, 255, 255))
            rgb.paste(rgba, mask=rgba.getchannel("A"))
        else:
            rgb = im.convert("RGB")
        data = rgb.tobytes()
    return DecodedImage(data, w, h, fmt, image.sha256)
