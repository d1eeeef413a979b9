"""The chat's pictures: attached only for a model that sees (one line otherwise, at attach time),
kept with the question by digest (app/history/pictures.py), and sent again with it.

A question's pictures go in front of its text, one media marker each, as the engine places the
pictures of a request that names no place for them (engine/decoding/prompting/media.py): a new
question with a picture is the very prompt `engine.generate(messages, images=...)` reads. An
earlier question keeps its markers and pictures, so the model still sees the chart the follow-up
question asks about; a question left out to fit the context takes its pictures with it.
"""

from __future__ import annotations

from typing import Callable, Sequence

from PySide6.QtCore import QObject

from engine.documents.images import MAX_IMAGES, MEDIA_MARKER, ImageError, ImageInput

from ...history import History, HistoryError, Message
from ...history.pictures import image_bytes, image_refs, image_span, keep_images
from ...session import Session
from ...tool_worker import replayed_calls
from ...widgets.attachments.attachments import AttachmentChips
from ...widgets.attachments.images import ImageAttachment, image_attachment


def text_only_line(model: str) -> str:
    """The one line for a picture given to a model that reads text only."""
    return (f"{model} reads text only: pictures need a model that sees (one with its mmproj-*.gguf projector "
            "beside it); load one to send pictures")


class Pictures(QObject):
    """Attaching pictures to the prompt: refused for a loaded text-only model, else checked one
    by one within the engine's bounds, each refusal one line."""

    def __init__(self, session: Session, chips: AttachmentChips, fail: Callable[[str], None]):
        super().__init__(chips)
        self._session, self._chips, self._fail = session, chips, fail

    def refusal(self) -> str | None:
        """Why pictures cannot go to the loaded model (None: it sees, or none is loaded yet:
        Send asks again once one is)."""
        s = self._session
        if s.engine is None or s.sees_images:
            return None
        return text_only_line(s.pair.label if s.pair is not None else "the loaded model")

    def attach(self, arriving: Sequence[tuple[str, Callable[[], ImageAttachment]]]) -> None:
        """Attach each (name, read) picture: `read` returns it checked or raises ImageError."""
        why = self.refusal()
        if why is not None:
            self._fail(why)
            return
        refused = []
        for name, read in arriving:
            if len(self._chips.images()) >= MAX_IMAGES:
                refused.append(f"{name}: not attached, a message takes at most {MAX_IMAGES} pictures")
                continue
            try:
                self._chips.add_image(read())
            except ImageError as e:
                refused.append(str(e))
        if refused:
            self._fail("\n".join(refused))


def question_spans(images: Sequence[ImageAttachment], parts: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """A question's spans: its pictures' (empty) parts first, then its files' and text's."""
    return [image_span(im.sha256, im.name) for im in images] + list(parts)


def keep(history: History, images: Sequence[ImageAttachment]) -> None:
    """Store the pictures (once each) before the question that names them; HistoryError."""
    if images:
        keep_images(history, [(im.sha256, im.data) for im in images])


def stored_images(history: History, m: Message) -> list[ImageInput]:
    """The pictures question `m` was sent with, from the history; ImageError naming one that is
    no longer there (a file edited by hand, an archive that lacked it)."""
    out = []
    for sha, name in image_refs(m.spans):
        data = image_bytes(history, sha)
        if data is None:
            raise ImageError(f"the picture {name} of an earlier message is no longer in the history: "
                             "edit that message without it, or start a new chat")
        out.append(ImageInput(data, sha, name))
    return out


def stored_attachments(history: History, m: Message) -> list[ImageAttachment]:
    """Question `m`'s pictures as attachments again (an edit puts them back as chips); the ones
    no longer stored or readable are left out."""
    out = []
    for sha, name in image_refs(m.spans):
        data = image_bytes(history, sha)
        try:
            if data is not None:
                out.append(image_attachment(data, name))
        except ImageError:
            continue
    return out


def has_pictures(m: Message) -> bool:
    return m.role == "user" and bool(image_refs(m.spans))


def conversation(history: History, msgs: Sequence[Message]) -> tuple[list[dict], list[list[ImageInput]]]:
    """`msgs` as chat messages (each question with a marker per picture before its text; an
    answer that called tools, its calls and their results first) and each one's pictures;
    ImageError for a picture no longer stored, HistoryError on a read."""
    chat: list[dict] = []
    pictures: list[list[ImageInput]] = []
    for m in msgs:
        if m.role == "assistant" and m.tool_calls:
            turns = replayed_calls(m.id, m.tool_calls)
            chat += turns
            pictures += [[] for _ in turns]
        if m.role not in ("user", "assistant") or not (m.content or has_pictures(m)):
            continue
        images = stored_images(history, m) if has_pictures(m) else []
        chat.append({"role": m.role, "content": marked(m.content, len(images))})
        pictures.append(images)
    return chat, pictures


def marked(content: str, n: int) -> str:
    """`content` with `n` media markers before it, as the engine places a request's pictures."""
    return MEDIA_MARKER * n + "\n" + content if n else content


def tokens_of(messages: Sequence[dict], sizes: Sequence[int]) -> int:
    """The tokens of the pictures `messages` mark: the last ones of the chat's `sizes` (what
    `Engine.image_tokens` counted for its pictures in order), since a fitted chat is a tail."""
    marked_here = sum(str(m.get("content") or "").count(MEDIA_MARKER) for m in messages)
    return sum(sizes[max(0, len(sizes) - marked_here):]) if marked_here else 0


class PictureTokens:
    """The tokens pictures take with the loaded model, for the token meter: counted once per
    picture and model (by digest, so a question's pictures are read from the history once)."""

    def __init__(self, session: Session, history: History):
        self._session, self._history = session, history
        self._counted: dict[tuple[int, str], int] = {}

    def of(self, questions: Sequence[Message], attached: Sequence[ImageAttachment]) -> int:
        """The pictures of the questions sent and of the prompt's chips (0 for a model that
        reads text only: Send says why they cannot go)."""
        eng = self._session.engine
        if eng is None or not self._session.sees_images:
            return 0
        total = 0
        for sha, name in [ref for m in questions if m.role == "user" for ref in image_refs(m.spans)]:
            total += self._tokens(eng, sha, name, lambda sha=sha: image_bytes(self._history, sha))
        for im in attached:
            total += self._tokens(eng, im.sha256, im.name, lambda im=im: im.data)
        return total

    def _tokens(self, eng: object, sha: str, name: str, data: Callable[[], bytes | None]) -> int:
        from engine.errors import TandemError

        key = (id(eng), sha)
        if key not in self._counted:
            raw = data()
            try:
                self._counted[key] = eng.image_tokens([ImageInput(raw, sha, name)])[0] if raw else 0  # type: ignore[attr-defined]
            except TandemError:  # a picture that cannot be sent is refused when it is; it counts nothing here
                self._counted[key] = 0
        return self._counted[key]


def kept(pictures: Sequence[Sequence[ImageInput]], dropped: int) -> tuple[ImageInput, ...]:
    """The pictures of the messages sent after the first `dropped` were left out to fit."""
    return tuple(im for group in pictures[dropped:] for im in group)

