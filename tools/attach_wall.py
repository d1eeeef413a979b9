"""Issue #47's Done-when for documents as a user runs it: `tandem generate --attach DOC "question"`,
a new process per run, timed from process start to exit, Auto with the pair's draft (the app's
default) against the target alone, interleaved, medians per question kind (quote, extract,
summary) of the long documents suite.

    flock /tmp/cpu.lock python -m tools.attach_wall --pair qwen2.5-coder-1.5b --repeat 3 \\
        --home warm --out docs/results/attach-wall/

Every run passes `--no-history-draft`, so no run drafts from an answer an earlier one stored.
`--home` says what the data folder holds:
- `cold`: a new empty folder per run: nothing kept from before (no prompt cache, no measured
  costs), a first-time user's run; both sides read the whole document.
- `warm`: one folder for the whole measurement, each document read once (untimed, target alone,
  one token) before the timed runs: the prompt cache holds it, as after a first question about it,
  and Auto's measured costs persist as they do on a machine in use. Both sides read it from there.

Each run's text is compared with the target alone's of the same repetition; time to first token
is the run's own (request start to first token, from `--json`'s stats), beside the wall-clock.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

CONFIGS = {"target": ["--draft", "none", "--lookahead", "0"], "auto": ["--lookahead", "auto"]}
BLOCK = re.compile(r"\AAttached file `(?P<name>[^`\n]+)`:\n\n(?P<fence>`{3,})\n(?P<text>.*)\n(?P=fence)\n\n(?P<ask>.+)\Z",
                   re.S)


@dataclass
class Asked:
    id: str
    kind: str
    name: str
    text: str  # the document
    question: str


@dataclass
class Run:
    id: str
    kind: str
    config: str
    rep: int
    wall_s: float
    ttft_s: float
    decode_tok_s: float
    tokens: int
    same_text: bool | None = None  # as the target alone's of the same repetition (None: it is that run)
    text: str = ""
    ids: list[int] = field(default_factory=list)  # the answer's tokens
    parted: str | None = None  # where an Auto text parts from target alone's, with the margin there (--margins)


def questions(suite: str, limit: int | None = None) -> list[Asked]:
    """The suite's questions about one attached document each, split back into file and question."""
    from engine.measure.suites import load_suite

    out = []
    for p in load_suite(suite).prompts:
        m = BLOCK.match(p.prompt) if isinstance(p.prompt, str) else None
        if m is None:
            raise SystemExit(f"{suite}: {p.id} is not one attached document and a question")
        out.append(Asked(p.id, p.kind or "all", m["name"], m["text"], m["ask"]))
    return out[:limit]


def generate(where: Sequence[str], folder: Path, asked: Asked, config: Sequence[str], max_tokens: int,
             home: str) -> tuple[float, dict[str, Any]]:
    """One `tandem generate` process: its wall-clock seconds and its --json output."""
    doc = folder / asked.name
    if not doc.exists():
        doc.write_text(asked.text, encoding="utf-8")
    cmd = [sys.executable, "-m", "engine.cli", "generate", *where, *config, "--chat", "--attach", str(doc),
           asked.question, "--max-tokens", str(max_tokens), "--json", "--no-history-draft", "--ctx", "4096"]
    env = dict(os.environ, TANDEM_HOME=home)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"tandem generate failed ({done.returncode}): {done.stderr.strip()[-800:]}")
    return wall, json.loads(done.stdout)


def measure(where: Sequence[str], asked: Sequence[Asked], repeat: int, max_tokens: int, home: str,
            log: Any = sys.stderr) -> list[Run]:
    """Every question in both configurations, `repeat` times, the order of the two swapped each
    repetition and question."""
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="tandem-attach-") as tmp:
        folder = Path(tmp)
        shared = str(folder / "home")
        if home == "warm":
            for a in {a.name: a for a in asked}.values():  # each document read once, untimed
                generate(where, folder, a, CONFIGS["target"], 1, shared)
        for rep in range(repeat):
            for i, a in enumerate(asked):
                order = list(CONFIGS) if (rep + i) % 2 == 0 else list(reversed(CONFIGS))
                texts: dict[str, str] = {}
                mine: list[Run] = []
                for name in order:
                    where_home = shared if home == "warm" else tempfile.mkdtemp(dir=folder, prefix="home-")
                    wall, out = generate(where, folder, a, CONFIGS[name], max_tokens, where_home)
                    st = out["stats"]
                    texts[name] = out["text"]
                    mine.append(Run(a.id, a.kind, name, rep, round(wall, 3), round(st["time_to_first_token_s"], 3),
                                    round(st.get("decode_tokens_per_s") or 0.0, 2), len(out["tokens"]), text=out["text"],
                                    ids=[int(t) for t in out["tokens"]]))
                    print(f"rep {rep + 1} {a.id} {name}: {wall:.2f} s wall, first token "
                          f"{st['time_to_first_token_s']:.2f} s", file=log, flush=True)
                for r in mine:
                    r.same_text = None if r.config == "target" else r.text == texts["target"]
                runs += mine
    return runs


def margins(target: str, asked: Sequence[Asked], runs: Sequence[Run]) -> None:
    """For each Auto run whose answer differs from target alone's of its repetition: where they
    part and the target's top-two margin there (`Engine.first_divergence`, the suites' noise rule),
    the prompt tokenised as `tandem generate --chat --attach` makes it."""
    from engine import Engine
    from engine.documents.blocks import attachment_block, with_attachments

    by = {(r.id, r.rep, r.config): r for r in runs}
    differ = [r for r in runs if r.config == "auto" and r.ids != by[(r.id, r.rep, "target")].ids]
    if not differ:
        return
    questions_by_id = {a.id: a for a in asked}
    # a document read as the runs read it: on the plain twin where the target's weights are repacked
    eng = Engine(target, n_ctx=4096, metrics_log=False, calibration=False, prompt_cache=False, plain_reading="always")
    try:
        for r in differ:
            a = questions_by_id[r.id]
            prompt = eng.tokens_for(with_attachments(a.question, [attachment_block(a.name, a.text)]), chat=True)
            div = eng.first_divergence(prompt, by[(r.id, r.rep, "target")].ids, r.ids, ends=True, stepwise=True)
            r.parted = "the same tokens, one cut short" if div is None else div.describe(eng.target)
    finally:
        eng.close()


def summary(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Per question kind: medians of Auto against target alone, each ratio of one question and
    repetition (wall-clock and decode: above 1 is faster; first token: below 1 is sooner)."""
    pairs: dict[str, list[tuple[Run, Run]]] = {}
    by = {(r.id, r.rep, r.config): r for r in runs}
    for r in runs:
        if r.config == "auto":
            pairs.setdefault(r.kind, []).append((by[(r.id, r.rep, "target")], r))
    out = []
    for kind, ps in pairs.items():
        wall = [t.wall_s / a.wall_s for t, a in ps]
        first = [a.ttft_s / t.ttft_s for t, a in ps if t.ttft_s > 0]
        dec = [a.decode_tok_s / t.decode_tok_s for t, a in ps if t.decode_tok_s > 0]
        out.append({"kind": kind, "runs": len(ps), "target_wall_s": statistics.median(t.wall_s for t, _ in ps),
                    "auto_wall_s": statistics.median(a.wall_s for _, a in ps),
                    "wall_ratio": statistics.median(wall), "wall_range": [min(wall), max(wall)],
                    "target_ttft_s": statistics.median(t.ttft_s for t, _ in ps),
                    "ttft_ratio": statistics.median(first) if first else None,
                    "decode_ratio": statistics.median(dec) if dec else None,
                    "same_text": sum(bool(a.same_text) for _, a in ps)})
    return out


def table(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| kind | runs | target wall s | Auto wall s | Auto wall-clock vs target (range) | target first token s "
             "| Auto first token vs target | decode vs target | text identical |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ttft = "-" if r["ttft_ratio"] is None else f"{r['ttft_ratio']:.2f}x"
        dec = "-" if r["decode_ratio"] is None else f"{r['decode_ratio']:.2f}x"
        lines.append(f"| {r['kind']} | {r['runs']} | {r['target_wall_s']:.2f} | {r['auto_wall_s']:.2f} | "
                     f"**{r['wall_ratio']:.2f}x** ({r['wall_range'][0]:.2f}-{r['wall_range'][1]:.2f}) | "
                     f"{r['target_ttft_s']:.2f} | {ttft} | {dec} | {r['same_text']} of {r['runs']} |")
    return "\n".join(lines)


def _target_file(a: argparse.Namespace) -> str:
    if a.target:
        return a.target
    from engine.cli.common import resolve_pair

    return str(resolve_pair(argparse.Namespace(pair=a.pair, target=None, draft=None))[0])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.attach_wall", description=__doc__.split("\n\n")[0])
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--pair", help="a catalog pair: Auto drafts with its draft model and the free drafters")
    which.add_argument("--target", help="a target file: Auto drafts with the free drafters (--draft lookup)")
    ap.add_argument("--suite", default="long_documents")
    ap.add_argument("--limit", type=int, default=None, help="the suite's first N questions")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--home", choices=["cold", "warm"], default="warm", help="what the data folder holds (see above)")
    ap.add_argument("--margins", action="store_true", help="where each differing text parts, with the target's margin")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if a.repeat < 1 or a.max_tokens < 1:
        ap.error("--repeat and --max-tokens must be at least 1")
    where = ["--pair", a.pair] if a.pair else ["--target", a.target, "--draft", "lookup"]
    asked = questions(a.suite, a.limit)
    runs = measure(where, asked, a.repeat, a.max_tokens, a.home)
    if a.margins:
        margins(_target_file(a), asked, runs)
    rows = summary(runs)
    md = table(rows) + "".join(f"\n- {r.id} (repetition {r.rep + 1}): {r.parted}" for r in runs if r.parted)
    print(md)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "runs.json").write_text(json.dumps({"argv": list(argv or sys.argv[1:]), "home": a.home,
                                                     "runs": [asdict(r) for r in runs], "summary": rows}, indent=1))
        (a.out / "summary.md").write_text(md + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
