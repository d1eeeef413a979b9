"""Answering: Send, the streaming answer (tokens, steps, prefill, stats), and saving it."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...history import HistoryError, message_markdown
from ...widgets.attachments import compose
from ...widgets.export import whole_words
from ...widgets.model_bar import draft_model_path
from ...widgets.transcript import spans_from_tokens
from ... import workers
from .format import stats_text

TITLE_CHARS = 120  # a new chat's title: its first line, elided in the list, whole in an export's name
PARTIAL_SAVE_S = 1.0  # how often the answer being written is kept in the history (a crash loses at most this)


class AnsweringMixin:
    """ChatView's generation: from Send to the saved answer."""

    def _draft_spec(self) -> Any:
        """The Draft box's choice for the loaded target. "Draft model" when the pair was loaded
        without one: the engine loads the pair's draft at the first answer that needs it."""
        key = self.drafter.currentData()
        if key == "lookup":
            return "lookup"
        if key == "none":
            return None
        pair = self.session.pair
        if pair is None:
            return None
        if draft_model_path(pair.draft) is not None:
            return pair.draft
        choice = self.model_bar.current()
        loaded = choice is not None and choice.draft is not None and Path(choice.target) == Path(pair.target)
        return choice.draft if loaded else "lookup"

    def _compose(self, text: str) -> str:
        """The user's message as stored and sent: the typed text, then each attachment."""
        return compose(text, self.attachments.items())[0]

    def _conversation_chat(self, before: int | None = None) -> list[dict]:
        """The open conversation as chat messages, those before message `before` only; while
        editing, only what precedes the edited message (Send replaces it and drops what follows)."""
        if self.conversation_id is None:
            return []
        msgs = self.history.messages(self.conversation_id)
        if before is None and self._editing is not None and self._editing[0] == self.conversation_id:
            before = self._editing[1]
        if before is not None:
            msgs = [m for m in msgs if m.id < before]
        return [{"role": m.role, "content": m.content} for m in msgs if m.role in ("user", "assistant") and m.content]

    def _fit_to_context(self, chat: list[dict]) -> Any:
        """The chat to send (engine/models/context_window.py's rule), or None after saying why not."""
        from engine.models.context_window import TooLarge, fit_chat
        from engine.errors import TandemError

        eng, system = self.session.engine, self.system.toPlainText()
        sys_msgs = [{"role": "system", "content": system}] if system else []
        try:
            return fit_chat(sys_msgs, chat, lambda msgs: len(eng.tokens_for(msgs, chat=True)), eng.n_ctx,
                            self.max_tokens.value())
        except TooLarge as e:
            self.error.emit(str(e))
        except TandemError as e:  # a chat template that cannot render these messages
            self.error.emit(str(e))
        return None

    def _show_context_note(self, note: str) -> None:
        self.context_note.setText(note)
        self.context_note.setVisible(bool(note))
        if note:
            self.message.emit(note)

    def send(self) -> None:
        text = self.prompt.toPlainText().strip()
        if not text and not self.attachments.items():
            return
        if self.session.engine is None:
            self.error.emit("No model loaded: pick one in the bar above the chat (or in Models) and Load")
            return
        if self.session.busy:
            self.message.emit(f"Busy: {self.session.busy}")
            return
        content, parts = compose(text, self.attachments.items())
        fit = self._fit_to_context(self._conversation_chat() + [{"role": "user", "content": content}])
        if fit is None:  # refused before anything is stored: the typed text and the chips stay
            return
        chat = [m for m in fit.messages if m["role"] != "system"]
        try:
            self._store_question(text, content, parts)
        except HistoryError:  # disk full, read-only: the window has said so; the typed text stays
            return
        self.prompt.clear()
        self.attachments.clear()
        self._show_context_note(fit.note)
        self.auto_note.hide()
        self._start_answer(chat)

    def _store_question(self, text: str, content: str, parts: list[tuple[int, str]]) -> None:
        """Save the question (`parts`: where its typed text and its files are) and an empty
        answer to fill; `HistoryError` when a write fails."""
        if self.conversation_id is None:
            title = whole_words((text or self.attachments.items()[0].name).splitlines()[0], TITLE_CHARS)
            conv = self.history.create(title=title, system_prompt=self.system.toPlainText())
            self.conversation_id = conv.id
            self.refresh_conversations()
        else:
            self.history.set_system_prompt(self.conversation_id, self.system.toPlainText())
        self._drop_edited_message()
        self.history.add_message(self.conversation_id, "user", content, spans=parts)
        self.transcript.set_messages(self.history.messages(self.conversation_id))
        self._assistant_msg = self.history.add_message(self.conversation_id, "assistant", "", status="generating")

    def _start_answer(self, prompt: Any, *, chat: bool = True) -> None:
        """Stream an answer into `self._assistant_msg`: `prompt` is the chat messages (or,
        for Continue, the prompt's token ids)."""
        self._stream_tokens = []
        self._partial_saved = float("-inf")  # the first tokens are kept at once
        self._k_shown = None
        self.charts.reset()
        self.transcript.begin_stream()
        self.live_stats.reset()
        self.stats_label.setText(self.live_stats.text())
        self._stats_timer.start()
        w = workers.GenerationWorker(self.session.engine, self._request(prompt, chat=chat))
        w.tokens.connect(self._on_tokens)
        w.steps.connect(self._on_steps)
        w.prefill.connect(self._on_prefill)
        w.done.connect(self._on_done)
        w.failed.connect(self._on_failed)
        w.finished.connect(self._on_finished)
        self.worker = w
        self.transcript.set_progress("Waiting for the model…")  # until the engine starts reading the prompt
        self.session.run(w, "chat")
        self._sync_buttons()

    def _request(self, prompt: Any, *, chat: bool) -> Any:
        """The one engine.GenerationRequest for this answer, from the settings drawer; its
        lookahead is a live handle the slider and the Auto switch change mid-answer."""
        from engine import GenerationRequest, LiveLookahead

        seed = self.seed.value()
        return GenerationRequest.from_options(
            prompt, draft_model=self._draft_spec(), lookahead=LiveLookahead(self.lookahead.value()),
            max_tokens=self.max_tokens.value(), temperature=self.temperature.value(), top_p=self.top_p.value(),
            seed=None if seed < 0 else seed, chat=chat, system=self.system.toPlainText() or None, tag="chat",
        )

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self.message.emit("Stopping…")

    def _lookahead_changed(self, value: Any) -> None:
        if self.worker is not None:
            self.worker.set_lookahead(value)

    def _on_tokens(self, tokens: list) -> None:
        self._stream_tokens.extend(tokens)
        self.transcript.append_tokens(tokens)
        self._keep_partial()

    def _keep_partial(self) -> None:
        """Write what has streamed into the answer's row, at most once per PARTIAL_SAVE_S, so
        that a crash keeps it (the final save replaces it with the whole answer and its stats)."""
        now = time.monotonic()
        if self._assistant_msg is None or now - self._partial_saved < PARTIAL_SAVE_S:
            return
        self._partial_saved = now
        self.history.save_partial(self._assistant_msg.id, self._partial_text(), spans_from_tokens(self._stream_tokens))

    def _on_steps(self, steps: list) -> None:
        """Cheap on purpose (it runs while llama.cpp computes): append to the charts' series
        (drawn later, at most 5 times a second), move the slider only when Auto's k changes."""
        if not steps:
            return
        self.charts.add_steps(steps)
        self.live_stats.add_steps(steps)
        k = steps[-1].k
        if k != self._k_shown:
            self._k_shown = k
            self.lookahead.show_in_use(k)
        self.session.liveSpeed.emit(self.charts.series.live_rate())

    def _on_prefill(self, done: int, total: int) -> None:
        """Prompt progress, in the transcript where the answer will appear, and under it."""
        self.prefill_label.setText(f"Reading the prompt… {done}/{total} tokens" if done < total else "")
        self.prefill_label.setVisible(done < total)
        if done < total:
            self.transcript.set_progress(f"Reading the prompt… {100 * done // max(total, 1)}%")
        else:
            self.transcript.set_progress("Writing the first token…")

    def _partial_text(self) -> str:
        return "".join(ev.text for ev in self._stream_tokens)

    def _on_done(self, ev: Any) -> None:
        stats = ev.stats.to_dict()
        if self._closing and ev.stats.finish_reason == "cancelled":
            stats["stopped_by"] = "close"  # its badge: "stopped: the app was closed"
        status = "complete" if ev.stats.finish_reason != "cancelled" else "stopped"
        self._stats_timer.stop()
        self._save_answer(self._answer_prefix + ev.text, stats, status)
        self.stats_label.setText(stats_text(stats))
        self._show_auto_note(stats)
        self.meter.schedule()
        self.session.liveSpeed.emit(0.0)

    def _show_auto_note(self, stats: dict[str, Any]) -> None:
        """Auto drafted nothing: say so under the answer, the cost model's numbers on hover."""
        from engine.measure.report import auto_idle_note

        costs = None
        try:
            costs = self.session.engine.decoder(self._draft_spec()).cost.snapshot()  # created for this answer
        except Exception:  # the figures are a detail; the line stands without them
            costs = None
        note = auto_idle_note(stats, costs)
        self.auto_note.setVisible(note is not None)
        if note is not None:
            self.auto_note.setText(note[0])
            self.auto_note.setToolTip(note[1])

    def _on_failed(self, msg: str) -> None:
        self._stats_timer.stop()
        self.stats_label.clear()  # not "Generating…" under a failed answer
        self._save_answer(self._partial_text(), None, "failed")
        self.error.emit(msg)

    def _save_answer(self, text: str, stats: dict | None, status: str) -> None:
        if self._assistant_msg is None:
            return
        spans = spans_from_tokens(self._stream_tokens)
        try:
            self.history.update_message(self._assistant_msg.id, text, stats=stats, spans=spans, status=status)
        except HistoryError:  # the window has said so; the answer stays on screen for this session
            pass
        msg = replace(self._assistant_msg, content=text, stats=stats, spans=spans, status=status)  # its version kept
        self._assistant_msg = None
        self._answer_prefix = ""
        self.transcript.end_stream(msg)
        self.refresh_conversations()

    def _on_finished(self) -> None:
        self.worker = None
        self._stats_timer.stop()
        self.prefill_label.clear()
        self.prefill_label.hide()
        self._sync_buttons()

    def shutdown(self) -> None:
        """The window is closing: stop and keep whatever was written."""
        self._closing = True
        if self.worker is not None:
            self.worker.cancel()
            if self._assistant_msg is not None:
                self.history.update_message(self._assistant_msg.id, self._partial_text(),
                                            spans=spans_from_tokens(self._stream_tokens), status="stopped")

    @property
    def answering(self) -> bool:
        """An answer is being written (closing the window would stop it)."""
        return self.worker is not None

    def _sync_buttons(self, *_: object) -> None:
        running = self.worker is not None
        self.send_btn.setEnabled(not running and self.session.engine is not None)
        self.stop_btn.setEnabled(running)
        # the Draft box's items follow the model bar's selection (app/widgets/model_bar.py)

    def answer_markdown(self) -> str:
        if self.conversation_id is None:
            return ""
        last = next((m for m in reversed(self.history.messages(self.conversation_id)) if m.role == "assistant"), None)
        return message_markdown(last) if last else ""

    def _show_live_stats(self) -> None:
        """The stats line while streaming, a few times a second (not per token)."""
        if self.worker is not None:
            self.stats_label.setText(self.live_stats.text())
