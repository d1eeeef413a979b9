"""Micro-benchmark: GUI-thread CPU of streaming a code answer into the chat transcript.

    QT_QPA_PLATFORM=offscreen python -m tools.bench_md_stream [--lines 150] [--chars 4] [--repeat 5]

A Python answer of `--lines` lines inside one code fence (so the open last block is a long
fence for most of the answer) is fed to a shown Transcript `--chars` characters per token,
one token per frame (`flush`, as the 33 ms frame timer would), then stored (`end_stream`).
Prints the median `time.thread_time()` of the whole answer and of the streaming alone, and
the Markdown renderings made. No model is loaded: this measures the rendering only.
"""

from __future__ import annotations

import argparse
import statistics
import time

from PySide6.QtWidgets import QApplication


class _Tok:
    def __init__(self, text: str, provenance: str):
        self.text, self.provenance = text, provenance


def code_answer(lines: int) -> str:
    """A function-heavy answer: defs with docstrings, loops, comments."""
    body = []
    for i in range(lines):
        if i % 10 == 0:
            body.append(f"def step_{i // 10}(values: list[int]) -> int:")
        elif i % 10 == 1:
            body.append(f'    """Sum of the values from {i} on, weighted."""')
        elif i % 10 == 9:
            body.append("")
        else:
            body.append(f"    total_{i} = sum(v * {i} for v in values[{i}:])  # part {i}")
    return "Here is the code:\n\n```python\n" + "\n".join(body) + "\n```\n\nThat is all."


def run_once(answer: str, chars: int) -> tuple[float, float, int]:
    from app.history import Message
    from app.widgets.transcript.transcript import Transcript

    tr = Transcript()
    tr.resize(800, 600)
    tr.show()
    QApplication.processEvents()
    t0 = time.thread_time()
    tr.begin_stream()
    for i in range(0, len(answer), chars):
        tr.append_tokens([_Tok(answer[i:i + chars], "draft" if (i // chars) % 3 else "target")])
        tr.flush()
        QApplication.processEvents()  # layout and paint, as between frames
    streamed = time.thread_time() - t0
    renders = tr.stream_renders
    tr.end_stream(Message(1, 1, "assistant", answer))
    QApplication.processEvents()
    total = time.thread_time() - t0
    tr.close()
    tr.deleteLater()
    return total, streamed, renders


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=150)
    ap.add_argument("--chars", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    app = QApplication.instance() or QApplication([])
    answer = code_answer(args.lines)
    runs = [run_once(answer, args.chars) for _ in range(args.repeat)]
    total = statistics.median(r[0] for r in runs)
    streamed = statistics.median(r[1] for r in runs)
    frames = -(-len(answer) // args.chars)
    print(f"{args.lines}-line code answer, {len(answer)} chars, {frames} frames, {args.repeat} runs: "
          f"GUI thread {total:.2f} s per answer (streaming {streamed:.2f} s, {1000 * streamed / frames:.2f} ms per frame), "
          f"{runs[0][2]} renderings; all runs {[round(r[0], 2) for r in runs]}")
    del app


if __name__ == "__main__":
    main()
