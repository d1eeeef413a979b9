"""One wording for run statistics and progress, shared by the CLI and the app."""

from __future__ import annotations

from typing import Any, Mapping


def _get(stats: Any, name: str, default: Any = 0) -> Any:
    if isinstance(stats, Mapping):
        return stats.get(name, default)
    return getattr(stats, name, default)


def stats_parts(stats: Any, *, finish: bool = True) -> list[str]:
    """The pieces of a stats line, from a `RunStats` or its dict: tokens, wall-clock and
    decode speed, first token, acceptance only when something
    was drafted (an acceptance rate of nothing is no figure), a draft Auto set aside and why,
    and why it stopped."""
    parts = [
        f"{_get(stats, 'generated_tokens')} tokens in {_get(stats, 'wall_s', 0.0):.2f} s",
        f"{_get(stats, 'decode_tokens_per_s', 0.0):.1f} tok/s decode",
        f"first token {_get(stats, 'time_to_first_token_s', 0.0):.2f} s" + _from_cache(stats),
    ]
    drafted = _get(stats, "drafted")
    if drafted:
        parts += [f"acceptance {_get(stats, 'acceptance_rate', 0.0):.0%} ({_get(stats, 'accepted')}/{drafted})",
                  f"{_get(stats, 'mean_tokens_per_step', 0.0):.2f} tokens/step"]
    elif _get(stats, "mode", "") not in ("", "target"):
        parts.append("no tokens drafted")
    for source, why in (_get(stats, "set_aside", None) or {}).items():  # Auto stopped drafting with it
        parts.append(f"{source} set aside: {why}")
    if finish:
        parts.append(f"finish: {_get(stats, 'finish_reason', '')} ({_get(stats, 'stopped_by', '')})")
    return parts


def _from_cache(stats: Any) -> str:
    """" (1,481 of 1,525 prompt tokens from cache)" where a long start of the prompt was not read
    again; nothing for a short one (a chat template's start kept by the context)."""
    cached, total = _get(stats, "cached_tokens", 0) or 0, _get(stats, "prompt_tokens", 0) or 0
    if cached < 64 or not total:
        return ""
    return f" ({cached:,} of {total:,} prompt tokens from cache)"


def stats_line(stats: Any, sep: str = " | ", *, finish: bool = True) -> str:
    return sep.join(stats_parts(stats, finish=finish))


def draft_reading_line(done: int, total: int, left_s: float | None = None) -> str:
    """A model draft catching up with the prompt (between the target's steps): "draft reading
    the prompt: 1,200 of 3,000", with the time left when there is an estimate."""
    line = f"draft reading the prompt: {done:,} of {total:,}"
    return line + (f", about {seconds_left(left_s)} left" if left_s is not None else "")


def seconds_left(s: float) -> str:
    """A wait in words: "4 s", "3 min"."""
    return f"{max(1, round(s))} s" if s < 90 else f"{round(s / 60)} min"


def progress_line(done: int, total: int, label: str, width: int = 30) -> str:
    """[#####     ] 12/40 label"""
    filled = int(width * done / total) if total else width
    return f"[{'#' * filled:<{width}s}] {done}/{total} {label}"


def auto_idle_note(stats: Any, costs: Any = None) -> tuple[str, str] | None:
    """(line, details) when Auto drafted nothing in an answer, else None.

    The line says why in words a person can act on; the details are the cost model's
    figures behind it (`costs`: a `lookahead.Costs` snapshot of the pair that ran), for a
    tooltip: the draft's cost against a target step, the verify curve, the acceptance
    estimate and the best lookahead it predicts."""
    mode = _get(stats, "mode", "")
    if _get(stats, "drafted") or mode in ("", "target") or not str(_get(stats, "lookahead", "")).startswith("auto"):
        return None
    if mode == "lookup":
        line = "Prompt lookup drafted nothing: this answer did not repeat text from the prompt or the chat"
    else:
        line = "Auto is not drafting: on this machine the draft costs more than it saves — try Prompt lookup for edits"
    if costs is None:
        return line, ""
    v1 = costs.verify_time(1)
    rows = [f"one target step: {v1 * 1000:.1f} ms" + ("" if costs.verify_pts else " (prior: not measured yet)")]
    if mode == "model":
        d = costs.draft_time(1)
        rows.append(f"one draft token: {d * 1000:.1f} ms = {d / v1:.2f}× a target step (cost ratio)")
    curve = ", ".join(f"{n} tokens {costs.verify_time(n) / v1:.2f}×" for n in (2, 3, 5, 8))
    rows.append(f"verifying at once, against 1 token: {curve}")
    rows.append(f"acceptance estimate: {costs.alpha:.0%}")
    best = costs.best()
    rows.append(f"best predicted: lookahead {best.k} at {best.speedup:.2f}× the target alone"
                + (" (so Auto drafts nothing)" if best.k == 0 else ""))
    return line, "\n".join(rows)
