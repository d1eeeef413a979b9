"""The race's verdict: each side's summary and metrics, the headline speedup with its reason,
the speed bars' colour, and whether the outputs are identical. `Verdict` is the page's: it
fills the result box's widgets (layout.py) from engine.measure.racing's RaceResult."""

from __future__ import annotations

from typing import Any

from ... import theme
from ...session import Session
from .layout import SPEEDUP_DEFINITION, RaceParts
from ...widgets.controls.page_scroll import reveal


def side_summary(st: Any) -> str:
    """One side's line under its pane: tokens, time, first token, acceptance, who drafted."""
    parts = [f"{st.generated_tokens} tokens in {st.wall_s:.2f} s", f"first token {st.time_to_first_token_s:.2f} s"]
    if st.drafted:
        parts.append(f"acceptance {st.acceptance_rate:.0%}")
        parts.append(f"{st.mean_tokens_per_step:.2f} tokens/step")
    by = getattr(st, "accepted_by", None) or {}
    if len(by) > 1:  # several drafters took turns (Auto's choice per step): who supplied what
        parts.append("drafted by " + ", ".join(f"{src} {n}" for src, n in sorted(by.items(), key=lambda kv: -kv[1])))
    for src, why in (getattr(st, "set_aside", None) or {}).items():  # Auto stopped drafting with it: why
        parts.append(f"{src} set aside: {why}")
    if st.finish_reason == "cancelled":
        parts.append("stopped")
    return " · ".join(parts)


class Verdict:
    """RaceView's result box: the headline, its reason, the bars, the metrics and the
    identical-output line. `session` names the tokens of a divergence (its target)."""

    def __init__(self, parts: RaceParts, session: Session) -> None:
        self._session = session
        self.speedup_label, self.speedup_detail, self.speedup_hint = (
            parts.speedup_label, parts.speedup_detail, parts.speedup_hint)
        self.bars, self.metric_labels, self.identical_label = parts.bars, parts.metric_labels, parts.identical_label
        self.dark = False
        self._race: Any = None  # the last race shown (engine.race.RaceResult), for its colour

    def set_dark(self, dark: bool) -> None:
        self.dark = dark
        self.bars.update()
        self._colour_speedup()

    def clear(self) -> None:
        """A new race: every figure back to "–"."""
        self._race = None
        for lab in self.metric_labels.values():
            lab.setText("–")
        self.speedup_label.setText("–")
        self.speedup_detail.setText(SPEEDUP_DEFINITION)
        self.speedup_hint.setText("")
        self._colour_speedup()
        self.identical_label.setText("")
        self.bars.clear()

    def fill_metrics(self, side: str, st: Any) -> None:
        vals = {
            "tok_s": f"{st.decode_tokens_per_s:.1f} tok/s",
            "ttft": f"{st.time_to_first_token_s * 1000:.0f} ms",
            "acceptance": f"{st.acceptance_rate:.0%}" if st.drafted else "–",
            "per_step": f"{st.mean_tokens_per_step:.2f}",
            "tokens": str(st.generated_tokens),
            "wall": f"{st.wall_s:.2f} s",
        }
        for key, text in vals.items():
            self.metric_labels[(key, side)].setText(text)

    def show(self, r: dict, *, lookahead: Any, temperature: float) -> None:
        """The race's result (the RaceWorker's dict) with the settings it ran with."""
        race = self._race = r["race"]  # engine.race.RaceResult
        base, spec = race.target.stats, race.speculative.stats
        big, _, why = race.headline.partition(": ")
        self.speedup_label.setText(big)
        self.speedup_detail.setText(race.detail)
        self.speedup_hint.setText(self._hint(why, race, lookahead))
        self._colour_speedup()
        self.bars.set_values(neutral=not race.measured, target=base.decode_tokens_per_s,
                             speculative=spec.decode_tokens_per_s)
        self.identical_label.setText(self._identical_text(r, temperature))
        reveal(self.speedup_label)  # a page taller than the window scrolls to the verdict once laid out

    def _hint(self, why: str, race: Any, lookahead: Any) -> str:
        """The headline's reason, and what to try when drafting lost."""
        spec = race.speculative.stats
        hint = why[:1].upper() + why[1:] + "." if why else ""
        if spec.drafted and race.wall_speedup < 1.0 and race.measured:
            tip = "Try another drafter." if lookahead == "auto" else "Try Auto lookahead or another drafter."
            hint = (hint + " " if hint else "") + (
                f"Each target pass yielded {spec.mean_tokens_per_step:.2f} tokens on average. {tip}")
        elif spec.drafted and not why:
            hint = f"Each target pass yielded {spec.mean_tokens_per_step:.2f} tokens on average."
        return hint

    def _identical_text(self, r: dict, temperature: float) -> str:
        self.identical_label.setToolTip("")
        if r.get("identical"):
            good = theme.palette(self.dark).good
            return (f"<b style='color:{good}'>✓ Identical output.</b> Target + draft wrote exactly the tokens the "
                    "target alone wrote.")
        base, spec = r["target"], r["speculative"]
        if temperature > 0:
            return ("<b>Outputs differ</b>, as expected when sampling (temperature &gt; 0): speculative sampling "
                    "keeps the target's distribution, not its exact text. Use temperature 0 to check exactness.")
        div = r.get("divergence")
        if div is None:
            n = min(len(base.tokens), len(spec.tokens))
            return (f"<b>Outputs differ in length only:</b> the first {n} tokens are identical "
                    f"({len(base.tokens)} vs {len(spec.tokens)} tokens).")
        model = getattr(self._session.engine, "target", None)
        try:
            text = div.describe(model)
        except Exception:  # the engine may be gone; the ids still say it
            text = div.describe(None)
        pal = theme.palette(self.dark)
        if not div.within_noise:  # a real break of the promise: say it as it is
            return f"<b style='color:{pal.bad}'>✗ Outputs differ.</b> {text.replace('<', '&lt;')}"
        self.identical_label.setToolTip(text[:1].upper() + text[1:] + ".")  # the technical detail, on hover
        return near_tie_words(div.index, div.margin, pal.near_tie)

    def _colour_speedup(self) -> None:
        """Green for a measured gain, orange for a loss; no colour when the headline is not a
        measure of speculation (about the same, a busy machine, a replay from memory)."""
        race = self._race
        colour = ""
        if race is not None and race.measured and race.wall_speedup > 0:
            pal = theme.palette(self.dark)
            colour = pal.good if race.wall_speedup > 1.0 else pal.warn
        self.speedup_label.setStyleSheet(f"color: {colour};" if colour else "")


def near_tie_words(index: int, margin: float, colour: str) -> str:
    """A near-tie divergence in words an audience follows: the promise held, arithmetic picked."""
    return (f"<b style='color:{colour}'>≈ Same model, a near-tie.</b> Both outputs are the target's own. "
            f"At token {index + 1} the target's top two choices were within {max(margin, 0.01):.2f} of each other, "
            "and the batched arithmetic of checking several tokens at once picked the other one; the texts "
            "differ from there. (Details on hover.)")
