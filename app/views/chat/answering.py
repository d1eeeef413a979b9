"""Answering: one answer streamed into its stored message, from the worker's start to the saved
answer (tokens, steps, prefill and stats on screen; the partial answer kept as it streams; Stop,
and the window closing mid-answer). With tools on for the chat (tool_calls.py), the answer runs
the tool loop: each call is a card above the answer and is saved with it."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QLabel, QPushButton

from ...history import History, HistoryError, Message
from ...session import Session
from ...widgets.transcript import code_highlight
from ...widgets.controls.live_label import LiveLabel
from ...widgets.charts.live_stats import REFRESH_MS, LiveStats
from ...widgets.panels.model_bar import ModelBar, draft_model_path
from ...widgets.charts.prefill_progress import PrefillProgress
from ...widgets.controls.token_meter import TokenMeter
from ...widgets.transcript.transcript import Transcript, spans_from_tokens
from ... import workers
from .format import stats_text
from .settings_panel import SettingsPanel
from .tool_calls import ChatTools

PARTIAL_SAVE_S = 1.0  # how often the answer being written is kept in the history (a crash loses at most this)


@dataclass(frozen=True)
class AnswerView:
    """Where an answer shows while it is written, and the buttons that follow it."""

    transcript: Transcript
    stats_label: LiveLabel  # the stats line: live while streaming, the final stats after
    prefill_label: QLabel  # "Reading the prompt… n/N tokens" under the transcript
    auto_note: QLabel  # why Auto drafted nothing
    meter: TokenMeter  # recounted once an answer is in the conversation
    send_btn: QPushButton
    stop_btn: QPushButton


class AnswerStream(QObject):
    """Writes one answer at a time into a message already stored for it.

    Whoever asks (app/views/chat/asking.py) stores the message and calls `start`; this object
    runs the generation worker, shows what streams, keeps the partial answer in the history at
    most every PARTIAL_SAVE_S, and saves the whole answer with its stats and status at the end.
    `saved` says when an answer has been saved (the conversation list shows its new time).
    """

    saved = Signal()

    def __init__(self, session: Session, history: History, settings: SettingsPanel, model_bar: ModelBar,
                 view: AnswerView, notify: Callable[[str], None], fail: Callable[[str], None],
                 tools: ChatTools | None = None, parent: QObject | None = None):
        super().__init__(parent)
        self._tools = tools
        self.calls: list[dict] = []  # the tool calls of the answer being written
        self._session, self._history, self._settings, self._model_bar = session, history, settings, model_bar
        self._view, self._notify, self._fail = view, notify, fail
        self.worker: workers.GenerationWorker | None = None  # the answer being written, if any
        self.message: Message | None = None  # its stored row, until it is saved
        self.tokens: list = []  # what has streamed (a continued answer's stored part first)
        self.live_stats = LiveStats()
        self.prefill = PrefillProgress()  # how far the prompt is read, between the engine's batches
        self._prefix = ""  # Continue: the stored part of the answer being continued
        self._partial_saved = float("-inf")  # when the answer being written was last kept (time.monotonic)
        self._k_shown: int | None = None  # the lookahead last shown on the slider while streaming
        self._closing = False  # the window is closing: a stopped answer says so, not "stopped by you"
        self._sources: list[dict] | None = None  # the Library sources of the answer being written
        self._stats_timer = QTimer(self)
        self._stats_timer.setInterval(REFRESH_MS)
        self._stats_timer.timeout.connect(self._show_live_stats)
        session.busyChanged.connect(self.sync_buttons)
        session.pairChanged.connect(self.sync_buttons)
        session.pairChanged.connect(lambda pair: QTimer.singleShot(0, code_highlight.warm) if pair is not None else None)

    @property
    def running(self) -> bool:
        """An answer is being written (closing the window would stop it)."""
        return self.worker is not None

    def draft_spec(self) -> Any:
        """The Draft box's choice for the loaded target. "Draft model" when the pair was loaded
        without one: the engine loads the pair's draft at the first answer that needs it."""
        key = self._settings.drafter.currentData()
        if key in ("lookup", "mtp", "suffix"):
            return key
        if key == "none":
            return None
        pair = self._session.pair
        if pair is None:
            return None
        if draft_model_path(pair.draft) is not None:
            return pair.draft
        choice = self._model_bar.current()
        loaded = choice is not None and choice.draft is not None and Path(choice.target) == Path(pair.target)
        return choice.draft if loaded else "lookup"

    def start(self, prompt: Any, into: Message, *, chat: bool = True, continuing: bool = False,
              sources: list[dict] | None = None, images: tuple = ()) -> None:
        """Stream an answer into the stored message `into`: `prompt` is the chat messages (or,
        for Continue, the prompt's token ids). `continuing`: `into` is a stopped answer whose
        stored part shows first, in its colours, and the new text is appended to it.
        `sources`: the Library passages the prompt holds, kept in the answer's stats. `images`:
        the pictures the prompt's media markers (or, for Continue, its image slots) stand for."""
        v = self._view
        self.message = into
        self._sources = sources
        self.calls = list(into.tool_calls) if continuing else []  # Continue keeps the calls it follows
        self._prefix = into.content if continuing else ""
        self.tokens = []
        self._partial_saved = float("-inf")  # the first tokens are kept at once
        self._k_shown = None
        self._settings.charts.reset()
        v.transcript.begin_stream(calls=list(self.calls) or None)
        self.live_stats.reset()
        self.prefill.reset()
        v.stats_label.setText(self.live_stats.text())
        self._stats_timer.start()
        w = self._worker(prompt, chat=chat and not continuing, images=images)
        if w is None:
            return
        w.tokens.connect(self._on_tokens)
        w.steps.connect(self._on_steps)
        w.prefill.connect(self._on_prefill)
        w.draft_reading.connect(self._on_draft_reading)
        w.done.connect(self._on_done)
        w.failed.connect(self._on_failed)
        w.finished.connect(self._on_finished)
        self.worker = w
        v.transcript.set_progress("Waiting for the model…")  # until the engine starts reading the prompt
        self._session.run(w, "chat")
        self.sync_buttons()
        if continuing:
            seeded = stored_tokens(into)
            self.tokens = list(seeded)
            v.transcript.append_tokens(seeded)
            v.transcript.flush()  # rendered at once, as it was: the continuation grows the rendered answer

    def _worker(self, prompt: Any, *, chat: bool, images: tuple = ()) -> workers.GenerationWorker | None:
        """A plain answer's worker, or the tool loop's when the chat has tools on (None: the
        mcp.json could not be read; the answer is saved as failed and the window says why)."""
        from engine.errors import TandemError

        request = self._settings.request(prompt, chat=chat, draft=self.draft_spec())
        if images:
            request = request.with_(images=tuple(images))
        # the local server's parallel slots, while it runs some: the answer (each model turn of
        # the tool loop) runs in one when they run its draft
        slots, model_draft = self._session.slots, self._session.slots_draft
        try:
            w = self._tools.worker(self._session.engine, request, slots=slots, model_draft=model_draft) \
                if self._tools is not None and chat else None
        except TandemError as e:
            self._on_failed(str(e))
            self._on_finished()
            return None
        plain = w is None
        if w is None:
            w = workers.GenerationWorker(self._session.engine, request, slots=slots, model_draft=model_draft)
        if slots is not None and w.slot_draft is None:
            self._notify("This answer waits for the local server's requests: the server's slots do not run "
                         "its draft (they run " + ", ".join(slots.drafts) + ")")
        if plain:
            return w
        w.call.connect(self._on_call)
        w.approval.connect(self._on_approval)
        w.progress.connect(self._view.transcript.set_progress)
        return w

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self._notify("Stopping…")

    def set_lookahead(self, value: Any) -> None:
        """The slider or the Auto switch moved: the answer being written follows at once."""
        if self.worker is not None:
            self.worker.set_lookahead(value)

    def shutdown(self) -> None:
        """The window is closing: stop and keep whatever was written."""
        self._closing = True
        if self.worker is not None:
            self.worker.cancel()
            if self.message is not None:
                self._history.update_message(self.message.id, self._partial_text(),
                                             spans=spans_from_tokens(self.tokens), status="stopped")

    def sync_buttons(self, *_: object) -> None:
        running = self.worker is not None
        self._view.send_btn.setEnabled(not running and self._session.engine is not None)
        self._view.stop_btn.setEnabled(running)
        # the Draft box's items follow the model bar's selection (app/widgets/panels/model_bar.py)

    def show_auto_note(self, stats: dict[str, Any]) -> None:
        """Auto drafted nothing: say so under the answer, the cost model's numbers on hover."""
        from engine.measure.report import auto_idle_note

        costs = None
        try:
            costs = self._session.engine.decoder(self.draft_spec()).cost.snapshot()  # created for this answer
        except Exception:  # the figures are a detail; the line stands without them
            costs = None
        note = auto_idle_note(stats, costs)
        self._view.auto_note.setVisible(note is not None)
        if note is not None:
            self._view.auto_note.setText(note[0])
            self._view.auto_note.setToolTip(note[1])

    # -- the worker's signals ------------------------------------------------------------
    def _on_tokens(self, tokens: list) -> None:
        self.tokens.extend(tokens)
        self._view.transcript.append_tokens(tokens)
        self._keep_partial()

    def _on_call(self, call: dict) -> None:
        """A tool was called (or refused): the text streamed for that step was the call, so the
        answer starts again under the cards."""
        self.calls.append(call)
        self.tokens = []
        self._view.transcript.begin_stream(calls=list(self.calls))
        self._view.transcript.set_progress("Waiting for the model…")

    def _on_approval(self, req: Any) -> None:
        """A call waits for the user: the step's text (the call's markup) gives way to the cards
        so far, and the line where the answer will appear says what is asked."""
        self.tokens = []
        self._view.transcript.begin_stream(calls=list(self.calls))
        self._view.transcript.set_progress(f"Waiting for your answer: may {req.tool} ({req.server}) run?")

    def _keep_partial(self) -> None:
        """Write what has streamed into the answer's row, at most once per PARTIAL_SAVE_S, so
        that a crash keeps it (the final save replaces it with the whole answer and its stats)."""
        now = time.monotonic()
        if self.message is None or now - self._partial_saved < PARTIAL_SAVE_S:
            return
        self._partial_saved = now
        self._history.save_partial(self.message.id, self._partial_text(), spans_from_tokens(self.tokens))

    def _on_steps(self, steps: list) -> None:
        """Cheap on purpose (it runs while llama.cpp computes): append to the charts' series
        (drawn later, at most once a second), move the slider only when Auto's k changes."""
        if not steps:
            return
        charts = self._settings.charts
        charts.add_steps(steps)
        self.live_stats.add_steps(steps)
        k = steps[-1].k
        if k != self._k_shown:
            self._k_shown = k
            self._settings.lookahead.show_in_use(k)
        self._session.liveSpeed.emit(charts.series.live_rate())

    def _on_draft_reading(self, done: int, total: int) -> None:
        """The model draft reads the prompt between the target's steps: the status line says so
        (and since when drafting starts) at once."""
        self.live_stats.draft_reading(done, total, time.monotonic())
        self._view.stats_label.setText(self.live_stats.text())

    def _on_prefill(self, done: int, total: int, cached: int = 0) -> None:
        self.prefill.update(done, total, time.monotonic(), cached)
        self._show_prefill()

    def _show_prefill(self) -> None:
        """Prompt progress, in the transcript where the answer will appear, and under it
        (between the engine's reports, estimated from their rate, with the time left)."""
        label, reading = self._view.prefill_label, self.prefill.reading
        label.setText(self.prefill.text(time.monotonic()) if reading else "")
        label.setVisible(reading)
        if reading:
            at, _left = self.prefill.estimate(time.monotonic())
            self._view.transcript.set_progress(f"Reading the prompt… {100 * at // max(self.prefill.total, 1)}%")
        else:
            self._view.transcript.set_progress("Writing the first token…")

    def _partial_text(self) -> str:
        return "".join(ev.text for ev in self.tokens)

    def _on_done(self, ev: Any) -> None:
        stats = ev.stats.to_dict()
        if self._closing and ev.stats.finish_reason == "cancelled":
            stats["stopped_by"] = "close"  # its badge: "stopped: the app was closed"
        if self._sources is not None:
            stats["sources"] = self._sources  # listed under the answer, kept in history and exports
        status = "complete" if ev.stats.finish_reason != "cancelled" else "stopped"
        if self.calls:
            stats["tool_calls"] = self.calls
            if self._partial_text() != self._prefix + ev.text:  # not what streamed last (stopped mid-call)
                self.tokens = [_StoredToken(self._prefix + ev.text, "plain")]
        self._stats_timer.stop()
        self._save(self._prefix + ev.text, stats, status)
        self._view.stats_label.setText(stats_text(stats))
        self.show_auto_note(stats)
        self._view.meter.schedule()
        self._session.liveSpeed.emit(0.0)

    def _on_failed(self, msg: str) -> None:
        self._stats_timer.stop()
        self._view.stats_label.clear()  # not "Generating…" under a failed answer
        self._save(self._partial_text(), {"tool_calls": self.calls} if self.calls else None, "failed")
        self._fail(msg)

    def _save(self, text: str, stats: dict | None, status: str) -> None:
        if self.message is None:
            return
        spans = spans_from_tokens(self.tokens)
        try:
            self._history.update_message(self.message.id, text, stats=stats, spans=spans, status=status)
        except HistoryError:  # the window has said so; the answer stays on screen for this session
            pass
        msg = replace(self.message, content=text, stats=stats, spans=spans, status=status)  # its version kept
        self.message = None
        self._prefix = ""
        self._view.transcript.end_stream(msg)
        self.saved.emit()

    def _on_finished(self) -> None:
        self.worker = None
        if self._tools is not None:
            self._tools.dismiss()  # a question still open belongs to the answer that ended
        self._stats_timer.stop()
        self._view.prefill_label.clear()
        self._view.prefill_label.hide()
        self.sync_buttons()

    def _show_live_stats(self) -> None:
        """The stats line while streaming, a few times a second (not per token); the prompt's
        progress while it is read."""
        if self.worker is not None:
            self._view.stats_label.setText(self.live_stats.text())
            if self.prefill.reading:
                self._show_prefill()


class _StoredToken:
    """A stored answer's run of one provenance, shaped like a TokenEvent for the transcript."""

    __slots__ = ("text", "provenance")

    def __init__(self, text: str, provenance: str):
        self.text, self.provenance = text, provenance


def stored_tokens(m: Message) -> list[_StoredToken]:
    """A stored answer as runs of one provenance each (its spans; text past them is plain)."""
    out, pos = [], 0
    for n, prov in m.spans:
        out.append(_StoredToken(m.content[pos:pos + n], prov))
        pos += n
    if pos < len(m.content):
        out.append(_StoredToken(m.content[pos:], "plain"))
    return out
