"""`tandem serve --parallel N`: answers run side by side in slots of one context, each the
answer it gets alone; /props and /slots say how many slots there are and which are busy."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402
from engine.errors import TandemError  # noqa: E402

PROMPTS = ["the value of", "def count items def count items", "return total and", "import data for the class",
           "while item is not", "print the total of the list"]


@pytest.fixture(scope="module")
def served(tiny_target):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)
    srv = ServerThread(create_app(ServedModel(eng, "m", draft="lookup", lookahead=3), ServerConfig(parallel=3))).start()
    yield eng, srv.url
    srv.stop()
    eng.close()


def _complete(url: str, i: int, **extra) -> dict:
    body = {"model": "m", "prompt": PROMPTS[i], "max_tokens": 20 + 9 * i, "temperature": 0, **extra}
    r = httpx.post(f"{url}/v1/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def _complete_at_once(url: str, n: int) -> dict[int, dict]:
    """Requests 0..n-1, each sent from a thread of its own at once: their answers by number."""
    got: dict[int, dict] = {}
    threads = [threading.Thread(target=lambda i=i: got.__setitem__(i, _complete(url, i))) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return got


def test_answers_sent_at_once_are_each_the_answer_alone(served):
    eng, url = served
    alone = [eng.generate(p, max_tokens=20 + 9 * i, draft_model="lookup", lookahead=3).text
             for i, p in enumerate(PROMPTS)]
    got: dict[int, str] = {}

    def ask(i: int) -> None:
        got[i] = _complete(url, i, draft=["lookup", "none", "suffix"][i % 3])["choices"][0]["text"]

    side_by_side: list[int] = []
    done = threading.Event()

    def watch() -> None:  # how many answers ran at once
        while not done.is_set():
            side_by_side.append(eng.queue.running_side_by_side)
            done.wait(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    done.set()
    watcher.join()
    assert [got.get(i) for i in range(len(PROMPTS))] == alone
    assert max(side_by_side) >= 2 and max(side_by_side) <= 3


def test_a_streamed_answer_in_a_slot_is_the_whole_answer(served):
    eng, url = served
    alone = _complete(url, 1)["choices"][0]["text"]
    text = ""
    with httpx.stream("POST", f"{url}/v1/completions", timeout=120,
                      json={"model": "m", "prompt": PROMPTS[1], "max_tokens": 29, "temperature": 0, "stream": True}) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                import json

                text += json.loads(line[6:])["choices"][0]["text"]
    assert text == alone


def _metrics(url: str) -> dict[str, float]:
    out = {}
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_metrics_say_each_slots_requests_tokens_and_accepted_drafts(served):
    eng, url = served
    before = _metrics(url)
    answers = [_complete(url, i) for i in range(3)]
    after = _metrics(url)

    def per_slot(name: str, m: dict[str, float]) -> float:
        return sum(m.get(f'{name}{{slot="{i}"}}', 0.0) for i in range(3))

    assert per_slot("tandem_slot_requests_total", after) - per_slot("tandem_slot_requests_total", before) == 3
    written = sum(a["usage"]["completion_tokens"] for a in answers)
    assert per_slot("tandem_slot_tokens_generated_total", after) - per_slot("tandem_slot_tokens_generated_total",
                                                                            before) == written
    assert after["tandem_tokens_generated_total"] - before.get("tandem_tokens_generated_total", 0) == written
    assert per_slot("tandem_slot_draft_tokens_accepted_total", after) >= 0
    assert [after[f'tandem_slot_busy{{slot="{i}"}}'] for i in range(3)] == [0.0, 0.0, 0.0]
    assert after["tandem_requests_running"] == 0.0


def test_props_and_slots_say_how_many_slots_and_which_are_busy(served):
    eng, url = served
    props = httpx.get(f"{url}/props").json()
    assert props["total_slots"] == 3
    slots = httpx.get(f"{url}/slots").json()
    assert [s["id"] for s in slots] == [0, 1, 2]
    assert all(s["n_ctx"] >= eng.n_ctx and s["is_processing"] is False for s in slots)


def test_one_slot_is_listed_without_parallel(tiny_target):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(tiny_target, n_ctx=256, metrics_log=False, calibration=False)
    try:
        with ServerThread(create_app(ServedModel(eng, "m"), ServerConfig())) as srv:
            assert httpx.get(f"{srv.url}/props").json()["total_slots"] == 1
            assert httpx.get(f"{srv.url}/slots").json() == [
                {"id": 0, "id_task": -1, "n_ctx": eng.n_ctx, "speculative": False, "is_processing": False}]
    finally:
        eng.close()


@pytest.mark.parametrize("parallel", [0, 65, True])
def test_a_bad_parallel_is_one_line(tiny_target, parallel):
    from engine.serving.server import ServedModel, ServerConfig, create_app

    eng = Engine(tiny_target, n_ctx=256, metrics_log=False, calibration=False)
    try:
        with pytest.raises(TandemError, match="--parallel must be a whole number of slots from 1 to 64"):
            create_app(ServedModel(eng, "m"), ServerConfig(parallel=parallel))
    finally:
        eng.close()


def test_a_server_with_a_draft_model_drafts_with_it_in_every_slot(tiny_target, tiny_draft):
    """The served draft model is each slot's default draft (a context of its own per slot); the
    answers sent at once are each the answer alone, and a request may still name a free draft."""
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)
    try:
        alone = [eng.generate(p, max_tokens=20 + 9 * i, draft_model=tiny_draft, lookahead=3).text
                 for i, p in enumerate(PROMPTS[:4])]
        with ServerThread(create_app(ServedModel(eng, "m", draft=tiny_draft, lookahead=3),
                                     ServerConfig(parallel=2))) as srv:
            got = _complete_at_once(srv.url, 4)
            assert [got[i]["choices"][0]["text"] for i in range(4)] == alone
            assert _complete(srv.url, 0, draft="lookup")["choices"][0]["text"] == alone[0]
            r = httpx.post(f"{srv.url}/v1/completions", timeout=60,
                           json={"model": "m", "prompt": "x", "max_tokens": 2, "draft": "mtp"})
            assert r.status_code == 400 and "has no MTP layers" in r.json()["error"]["message"]
    finally:
        eng.close()


def test_each_draft_in_the_slots_is_priced_by_a_cost_model_of_its_own_seeded_by_this_machine(tiny_target, tiny_draft):
    """The slots' Auto starts from the curve this machine measured for the target (the calibration
    store), and each draft name has its own cost model: a model draft's slots are not told their
    proposals are free because the free drafters' decoders were made after theirs (one model
    shared by all names drafted up to 16 model tokens a step)."""
    from engine.models import calibration
    from engine.serving.server import ServedModel, ServerConfig, create_app

    eng = Engine(tiny_target, n_ctx=512, metrics_log=False)
    try:
        calibration.save({eng.calibration_key(): {"verify_s": {"1": 0.25, "3": 0.5}}})
        create_app(ServedModel(eng, "m", draft=tiny_draft, lookahead="auto"), ServerConfig(parallel=2))
        (sched,) = eng._attached
        assert set(sched.costs) == {"model", "none", "lookup", "suffix"}
        assert all(c.verify_s == {1: 0.25, 3: 0.5} for c in sched.costs.values())
        assert not sched.costs["model"].free_drafter and sched.costs["lookup"].free_drafter
        assert sched.costs["suffix"].free_drafter and len({id(c) for c in sched.costs.values()}) == 4
        for slot in sched.slots:
            assert all(dec.cost is sched.costs[name] for name, dec in slot.decoders.items())
    finally:
        eng.close()


def test_a_hybrid_target_drafting_with_its_mtp_head_answers_in_parallel_as_alone(tiny_hybrid):
    """`--draft mtp --parallel 2` on a hybrid: each slot drafts with its own MTP context, takes its
    drafts back in its own sequence, and each answer is the engine's alone; lookup runs beside."""
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(tiny_hybrid, n_ctx=256, n_threads=1, metrics_log=False, calibration=False)
    try:
        alone = [eng.generate(p, max_tokens=20 + 9 * i, draft_model="mtp", lookahead=3).text
                 for i, p in enumerate(PROMPTS[:3])]
        with ServerThread(create_app(ServedModel(eng, "m", draft="mtp", lookahead=3),
                                     ServerConfig(parallel=2))) as srv:
            got = _complete_at_once(srv.url, 3)
            assert [got[i]["choices"][0]["text"] for i in range(3)] == alone
            assert _complete(srv.url, 1, draft="lookup")["choices"][0]["text"] == alone[1]
    finally:
        eng.close()


def test_gemma4_served_with_its_assistant_answers_in_parallel_as_alone(tiny_gemma4, tiny_gemma4_assistant):
    """`--draft <assistant> --parallel 2` on Gemma 4: each slot's assistant reads the target's KV
    cache on its own sequence; the answers sent at once are each the engine's alone, and drafted."""
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(tiny_gemma4, n_ctx=256, n_threads=1, metrics_log=False, calibration=False)
    try:
        alone = [eng.generate(p, max_tokens=20 + 9 * i, draft_model=str(tiny_gemma4_assistant), lookahead=3)
                 for i, p in enumerate(PROMPTS[:3])]
        app = create_app(ServedModel(eng, "m", draft=str(tiny_gemma4_assistant), lookahead=3), ServerConfig(parallel=2))
        heads = [s.decoders["model"].drafter for s in app.state.slots.slots]
        assert all(h.kind == "mtp" and h.model is not None for h in heads)  # each slot's own assistant
        with ServerThread(app) as srv:
            got = _complete_at_once(srv.url, 3)
            assert [got[i]["choices"][0]["text"] for i in range(3)] == [a.text for a in alone]
            assert all(a.stats.drafted > 0 for a in alone)
    finally:
        eng.close()


def test_pictures_sent_at_once_to_parallel_slots_are_each_answered_as_alone(tiny_vision_llama):
    """OpenAI image_url requests on --parallel 2 (beside a text one, more than the slots hold):
    each answer is the engine's alone for the same picture; the slots read the pictures."""
    import base64

    from engine.documents.images import MEDIA_MARKER
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app
    from image_files import png_bytes

    pictures = [png_bytes(32, 32, seed=4), None, png_bytes(40, 24, seed=5)]
    q = "What is in this picture?"

    def message(picture):
        if picture is None:
            return [{"role": "user", "content": q}]
        url = "data:image/png;base64," + base64.b64encode(picture).decode()
        return [{"role": "user", "content": [{"type": "text", "text": q}, {"type": "image_url", "image_url": {"url": url}}]}]

    target, projector = tiny_vision_llama
    eng = Engine(target, mmproj=projector, n_ctx=512, metrics_log=False, calibration=False)
    try:
        alone = [eng.generate([{"role": "user", "content": q + (MEDIA_MARKER if p else "")}], chat=True,
                              images=[p] if p else [], max_tokens=24 + 4 * i).text for i, p in enumerate(pictures)]
        with ServerThread(create_app(ServedModel(eng, "m", draft="lookup", lookahead=3),
                                     ServerConfig(parallel=2))) as srv:
            got: dict[int, httpx.Response] = {}

            def ask(i: int) -> None:
                got[i] = httpx.post(f"{srv.url}/v1/chat/completions", timeout=120, json={
                    "model": "m", "messages": message(pictures[i]), "max_tokens": 24 + 4 * i, "temperature": 0})

            threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(pictures))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            assert all(got[i].status_code == 200 for i in got), [got[i].text for i in got]
            assert [got[i].json()["choices"][0]["message"]["content"] for i in range(len(pictures))] == alone
            assert got[0].json()["usage"]["prompt_tokens"] >= got[1].json()["usage"]["prompt_tokens"] + 16
    finally:
        eng.close()


def test_embeddings_run_beside_busy_slots_at_once(tiny_target):
    """An embeddings request needs no slot (its own context): with every slot answering a long
    request it is answered at once, not after them (it hung for good before: the embedding's turn
    was a slot's, which the engine did not recognise as its own)."""
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    eng = Engine(tiny_target, n_ctx=512, metrics_log=False, calibration=False)
    try:
        with ServerThread(create_app(ServedModel(eng, "m", draft="lookup"), ServerConfig(parallel=2))) as srv:
            long_done: list[float] = []

            def long_answer(i: int) -> None:
                _complete(srv.url, i, max_tokens=400, ignore_eos=True)
                long_done.append(time.monotonic())

            threads = [threading.Thread(target=long_answer, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 60
            while eng.queue.running_side_by_side < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert eng.queue.running_side_by_side == 2  # both slots answer
            r = httpx.post(f"{srv.url}/v1/embeddings", json={"model": "m", "input": ["hello world", "the list"]},
                           timeout=60)
            embedded = time.monotonic()
            for t in threads:
                t.join(120)
            assert r.status_code == 200, r.text
            assert len(r.json()["data"]) == 2 and len(r.json()["data"][0]["embedding"]) == eng.target.n_embd
            assert len(long_done) == 2 and embedded < min(long_done)  # it did not wait for them
            alone = eng.embed([eng.embedding_tokens("hello world")])[0]
            assert abs(float(np.dot(alone, np.asarray(r.json()["data"][0]["embedding"]))) - 1.0) < 1e-4
    finally:
        eng.close()
