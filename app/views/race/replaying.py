"""The synchronised replay: both recorded runs again at the same time, each token at its
recorded time (times the chosen speed)."""

from __future__ import annotations

from ...replay import ReplayClock
from .layout import SIDES


class ReplayMixin:
    """RaceView's Replay button, speed box and frame timer."""

    def replay(self) -> None:
        """Play both recorded runs at once, each token at its recorded time (× speed)."""
        if self.running or not any(self.tokens.values()):
            return
        self._replay_timer.stop()
        for s in SIDES:
            self.panes[s].clear_text()
            self.panes[s].speed.setText("")
        self._replay = ReplayClock(self.tokens, speed=self._speed())
        self._replay.start()
        self.replay_frames = 0
        self._replay_timer.start()
        self.replay_btn.setText("↻ Restart replay")
        self._sync_buttons()
        self._replay_tick()

    def stop_replay(self) -> None:
        if self._replay_timer.isActive():
            self._replay_timer.stop()
            if self._replay is not None:
                for s, rest in self._replay.finish().items():
                    self.panes[s].append(rest)
                    self._show_pane_speed(s)
                    self.panes[s].finish()
            self.replay_label.setText("Replay stopped.")
            self.replay_btn.setText("▶ Replay side by side")
            self._sync_buttons()

    def _speed(self) -> float:
        return float(self.replay_speed.currentData() or 1.0)

    def _replay_speed_changed(self, _i: int) -> None:
        if self._replay is not None:
            self._replay.set_speed(self._speed())  # the virtual clock stays continuous

    def replay_time(self) -> float:
        """Seconds of recorded time the replay has reached."""
        return self._replay.time() if self._replay is not None else 0.0

    def _show_pane_speed(self, side: str) -> None:
        """The pane's header at this point of the replay (its final figure once all is shown)."""
        done = self.done.get(side)
        self.panes[side].speed.setText(
            self._replay.speed_text(side, done.stats.decode_tokens_per_s if done is not None else None))

    def _replay_tick(self) -> None:
        clock = self._replay
        if clock is None:
            return
        self.replay_frames += 1
        for s, due in clock.advance().items():
            if due:
                self.panes[s].append(due)
            self._show_pane_speed(s)
        self.replay_label.setText(
            f"Replay {min(clock.time(), clock.end):.2f} s of {clock.end:.2f} s at {self.replay_speed.currentText()}")
        if clock.done:
            for pane in self.panes.values():
                pane.finish()
            self._replay_timer.stop()
            self.replay_btn.setText("▶ Replay side by side")
            if self.result is not None:
                self.status.setText("Done.")
            self._sync_buttons()
            self.replayFinished.emit()

