"""Diagnostic (not landed): 4 clients in-process on SlotScheduler, 'none' vs 'model', per-step trace."""
import argparse, json, queue, threading, time, sys
from dataclasses import replace, asdict
from collections import Counter
sys.path.insert(0, ".")
from engine import Engine
from engine.cli.common import resolve_pair
from engine.decoding.events import StepEvent, DraftReadEvent, PrefillEvent, TokenEvent, DoneEvent
from engine.decoding.request import GenerationRequest
from engine.decoding.sampling.params import SamplingParams
from engine.decoding.slots.scheduler import SlotScheduler
from engine.measure.suites import load_suite

ap = argparse.ArgumentParser()
ap.add_argument("--clients", type=int, default=4)
ap.add_argument("--repeat", type=int, default=2)
ap.add_argument("--limit", type=int, default=8)
ap.add_argument("--max-tokens", type=int, default=96)
ap.add_argument("--drafts", default="none,model")
ap.add_argument("--out", default="/work/runs/s12/trace.json")
a = ap.parse_args()
t, d = resolve_pair(argparse.Namespace(pair="qwen2.5-coder-1.5b", target=None, draft=None))
eng = Engine(str(t), n_ctx=2048, history_draft=False, metrics_log=False)
prompts = [p.prompt for p in load_suite("code_editing").prompts if p.chat and p.fim is None][:a.limit]
toks = [eng.tokens_for(p if isinstance(p, list) else [{"role": "user", "content": p}]) for p in prompts]
n = 4
import engine.decoding.slots.scheduler as S
from engine.decoding.drafting import drafter_api as DA
PASSES = []
_real_pass = S.SlotScheduler._pass
def _pass(self, parts, plans, chunks):
    t = time.perf_counter()
    _real_pass(self, parts, plans, chunks)
    PASSES.append(dict(t=t, s=time.perf_counter() - t, plans=[len(p.rows) for _, p in plans],
                       free=[getattr(p.prop, "source", None) for _, p in plans], chunks=[c for _, c in chunks]))
S.SlotScheduler._pass = _pass
_real_plan = S.plan_slots
def plan_slots(*a, **kw):
    t = time.perf_counter(); r = _real_plan(*a, **kw)
    PASSES.append(dict(t=t, plan_s=time.perf_counter() - t))
    return r
S.plan_slots = plan_slots
_real_one = DA.one_pass
def one_pass(wants, left, n_batch, decode):
    t = time.perf_counter(); r = _real_one(wants, left, n_batch, decode)
    PASSES.append(dict(t=t, draft_s=time.perf_counter() - t, wants=len(wants), reads=sum(1 for w in wants.values() if w.reads)))
    return r
DA.one_pass = one_pass
import engine.decoding.drafting.batched_drafter as BD
BD.one_pass = one_pass
import engine.decoding.drafting.source_choice as SC
PICKS = []
_real_pick = SC.SourceChooser.pick
def pick(self, model_k, free):
    p = _real_pick(self, model_k, free)
    if p.index >= 0 and p.k >= 12:
        c = self.costs
        ch = free[p.index][:p.k]
        PICKS.append(dict(k=p.k, rate=p.tokens_per_s, plain=c.rate(1.0, c.pass_time(1)), load=(c.load.rows, c.load.tokens),
                          v1=c.verify_time(1), vload=c.pass_time(1), vk=c.pass_time(p.k + 1), expect=1 + sum(ch),
                          first=[round(x, 3) for x in ch[:6]], last=round(ch[-1], 3), pts=c.verify_pts[-3:]))
    return p
SC.SourceChooser.pick = pick
def make():
    return SlotScheduler(eng.target, n, runtime=replace(eng.runtime, n_ctx=eng.n_ctx * n),
                      drafters={"model": (lambda: eng.slot_drafter(d)), "none": (lambda: eng.slot_drafter("none")), "lookup": (lambda: eng.slot_drafter("lookup"))},
                      seed=eng.seed_cost, prompt_cache=eng.prompt_cache, reader=eng.reader)
sched = None
out = []
def round_(draft):
    global sched
    sched = make(); PASSES.clear()
    q = queue.Queue()
    for i in range(len(toks)):
        q.put(i)
    recs = []
    t0 = time.perf_counter()
    def client():
        while True:
            try:
                i = q.get_nowait()
            except queue.Empty:
                return
            r = GenerationRequest(list(toks[i]), lookahead="auto", max_tokens=a.max_tokens,
                                  sampling=SamplingParams(temperature=0.0))
            s = time.perf_counter(); first = None; steps = []; reads = []; ntok = 0; pre = None
            for ev in sched.stream(toks[i], r, draft=draft):
                if isinstance(ev, TokenEvent) and first is None:
                    first = time.perf_counter()
                if isinstance(ev, StepEvent):
                    steps.append((ev.k, ev.drafted, ev.accepted, ev.emitted, round(ev.draft_ms, 1), round(ev.verify_ms, 1), round(ev.t - t0, 3) if ev.t > 1e6 else ev.t))
                if isinstance(ev, DraftReadEvent):
                    reads.append((ev.done, ev.total, round(time.perf_counter() - t0, 3)))
                if isinstance(ev, PrefillEvent):
                    pre = (ev.done, ev.total, ev.cached)
                if isinstance(ev, DoneEvent):
                    ntok = len(ev.tokens)
            recs.append(dict(prompt=i, n_prompt=len(toks[i]), start=s - t0, ttft=(first - s) if first else None,
                             end=time.perf_counter() - t0, tokens=ntok, steps=steps, reads=reads, prefill=pre))
    th = [threading.Thread(target=client) for _ in range(a.clients)]
    for x in th: x.start()
    for x in th: x.join()
    wall = time.perf_counter() - t0
    sched.close()
    for p in PASSES: p["t"] -= t0
    tot = sum(r["tokens"] for r in recs)
    return dict(draft=draft, wall=wall, tokens=tot, tps=tot / wall, recs=recs, passes=list(PASSES))
try:
    for rep in range(a.repeat):
        for dr in a.drafts.split(","):
            R = round_(dr)
            ks = Counter(s[0] for r in R["recs"] for s in r["steps"])
            dsum = sum(s[4] for r in R["recs"] for s in r["steps"]); drafted = sum(s[1] for r in R["recs"] for s in r["steps"])
            acc = sum(s[2] for r in R["recs"] for s in r["steps"])
            nreads = sum(len(r["reads"]) for r in R["recs"])
            print(f"rep {rep} {dr}: {R['tps']:.2f} tok/s wall {R['wall']:.1f}s tokens {R['tokens']} k-hist {dict(sorted(ks.items()))} drafted {drafted} acc {acc} draft_ms {dsum:.0f} readevents {nreads}", flush=True)
            out.append(R)
finally:
    eng.close()
    json.dump(out, open(a.out, "w")); json.dump(PICKS, open(a.out + ".picks", "w"))
