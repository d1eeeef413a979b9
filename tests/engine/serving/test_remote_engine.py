"""A split target in a child process: a lost or hung worker is an error, not our death.

Loopback `tandem worker`s and tiny models, as in tests/engine/llamacpp/test_rpc.py. Each RemoteEngine
starts one child interpreter, so the tests share them where they can.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest

from engine.llamacpp import rpc_backend as rpc
from engine.serving.remote_engine import RemoteEngine, RemoteWorkerLost
from test_rpc import Worker, _wait_idle, free_port, needs_rpc

pytestmark = needs_rpc


@pytest.fixture(scope="module")
def loop_target(tmp_path_factory, vocab) -> Path:
    """5 layers whose greedy output cycles forever: a generation that only ends when asked."""
    from engine.models.tinymodel import write_model

    ids = [vocab.id(f"▁{w}") for w in ("the", "value", "of", "data")]
    return write_model(tmp_path_factory.mktemp("rpcproc") / "loop.gguf", n_layer=5, vocab=vocab, name="loop",
                       chain={a: b for a, b in zip(ids, ids[1:] + ids[:1])})


@pytest.fixture(scope="module")
def split_target(tmp_path_factory, vocab) -> Path:
    from engine.models.tinymodel import write_model

    return write_model(tmp_path_factory.mktemp("rpcproc") / "split.gguf", seed=5, n_layer=5, name="split-target", vocab=vocab)


def test_python_api_setup_with_rpc_uses_the_child_process_engine(split_target):
    """`engine.setup(path, rpc=...)`: a lost worker must raise here, not end the caller's
    process, so the module-level API gets the child-process engine, runtime options included."""
    import engine

    a = Worker()
    try:
        eng = engine.setup(str(split_target), rpc=[a.endpoint], metrics_log=False, calibration=False, n_threads=1)
        try:
            assert isinstance(eng, engine.RemoteEngine) and eng.runtime.threads == 1
            assert engine.RemoteWorkerLost is RemoteWorkerLost
            assert len(engine.generate("the value", max_tokens=5).tokens) == 5
        finally:
            eng.close()
    finally:
        a.kill()


def test_a_wrong_port_is_one_fast_error_and_starts_no_process(tiny_target):
    port = free_port()
    t0 = time.monotonic()
    with pytest.raises(rpc.RpcError, match=f"127.0.0.1:{port}: connection refused"):
        RemoteEngine(tiny_target, rpc=f"127.0.0.1:{port}", metrics_log=False)
    assert time.monotonic() - t0 < 2


def test_greedy_and_speculative_through_the_child_equal_local(split_target, tiny_draft):
    from engine import Engine

    prompt = "the value of the"
    local = Engine(split_target, metrics_log=False)
    expected = local.generate(prompt, max_tokens=32).tokens
    local.close()
    a, b = Worker(), Worker()
    try:
        eng = RemoteEngine(split_target, rpc=[a.endpoint, b.endpoint], metrics_log=False, calibration=False)
        try:
            assert eng.pid != os.getpid() and eng.rpc.endpoints == [a.endpoint, b.endpoint]
            assert [who for who, _ in eng.rpc.shares] == ["local CPU", a.endpoint, b.endpoint]
            assert eng.target.tokenize(prompt) == eng.tokens_for(prompt)
            seen = []
            plain = eng.generate(prompt, max_tokens=32, on_event=seen.append)
            assert plain.tokens == expected and plain.stats.steps == 32
            assert [e.token_id for e in plain.token_events] == expected and seen[-1].kind == "done"
            eng.decoder(tiny_draft)
            spec = eng.generate(prompt, draft_model=tiny_draft, lookahead=4, max_tokens=32)
            assert spec.tokens == expected and spec.stats.drafted > 0
            selfdraft = eng.generate(prompt, draft_model=split_target, lookahead=4, max_tokens=32)
            assert selfdraft.tokens == expected and selfdraft.stats.steps < 32
            from engine.decoding.quality import first_divergence
            from engine.measure.racing import compare, race

            toks = eng.tokens_for(prompt)
            other = expected[:5] + [(expected[5] + 1) % eng.target.n_vocab] + expected[6:]
            local = Engine(split_target, metrics_log=False)
            want = first_divergence(local.target, toks, expected, other)
            local.close()
            got = compare(eng, toks, expected, other, greedy=True).divergence  # the race's check, on the child
            assert got.index == want.index == 5 and abs(got.margin - want.margin) < 1e-3
            r = race(eng, eng.request(prompt, draft_model="lookup", lookahead=3, max_tokens=16))
            assert r.identical and r.target.tokens == expected[:16]
        finally:
            eng.close()
        assert not eng._proc.is_alive()
        with pytest.raises(Exception, match="closed"):
            eng.generate(prompt, max_tokens=2)
    finally:
        a.kill()
        b.kill()


def test_cancel_slider_and_abandoned_stream_reach_the_child(loop_target):
    from engine import LiveLookahead
    from engine.decoding.cancel import CancelToken

    a = Worker()
    try:
        eng = RemoteEngine(loop_target, rpc=[a.endpoint], metrics_log=False, calibration=False)
        try:
            token = CancelToken()
            events = eng.stream("the", max_tokens=1500, cancel=token)
            n = 0
            for ev in events:
                n += ev.kind == "token"
                if n == 5:
                    token.cancel()
                if ev.kind == "done":
                    assert ev.stats.finish_reason == "cancelled" and len(ev.tokens) < 1500
            live = LiveLookahead(1)  # the app's slider: moved mid-answer, applied from a later step
            ks: list[int] = []
            for ev in eng.stream("the", draft_model=loop_target, lookahead=live, max_tokens=400):
                if ev.kind == "step":
                    ks.append(ev.k)
                    if len(ks) == 3:
                        live.set(6)
            assert ks[:3] == [1, 1, 1] and 6 in ks and set(ks[ks.index(6):-3]) == {6}
            it = eng.stream("the", max_tokens=1500)
            assert next(it).kind in ("prefill", "token")
            it.close()  # the caller walked away mid-answer: the child stops, the pipe stays in step
            assert len(eng.generate("the", max_tokens=6).tokens) == 6
        finally:
            eng.close()
    finally:
        a.kill()


def test_killing_a_worker_mid_generation_is_a_clear_error_and_we_live_on(loop_target, split_target):
    """The child dies with llama.cpp's abort; this process names the worker and goes on."""
    from engine import Engine

    a, b = Worker(), Worker()
    try:
        eng = RemoteEngine(loop_target, rpc=[a.endpoint, b.endpoint], metrics_log=False, calibration=False)
        got: list = []
        t0 = None
        with pytest.raises(RemoteWorkerLost) as err:
            for ev in eng.stream("the", max_tokens=1900):
                got.append(ev)
                if len(got) == 10:
                    b.kill()
                    t0 = time.monotonic()
        assert t0 is not None and time.monotonic() - t0 < 15
        msg = str(err.value)
        assert msg.startswith(f"RPC worker {b.endpoint} was lost mid-generation") and "reload the model locally" in msg
        assert "\n" not in msg and ".cpp:" not in msg and err.value.endpoints == [b.endpoint]
        assert rpc.abort_reason("/x/ggml-rpc.cpp:569: Remote RPC server crashed") == "Remote RPC server crashed"
        assert len(got) >= 10  # what streamed before the loss was delivered
        assert not eng._proc.is_alive() and eng.lost is err.value
        with pytest.raises(RemoteWorkerLost):
            eng.generate("the", max_tokens=2)
        eng.close()
        assert _wait_idle(a.endpoint).devices  # the surviving worker serves the next client
        local = Engine(split_target, metrics_log=False)  # and this process can still generate
        assert len(local.generate("the value", max_tokens=5).tokens) == 5
        local.close()
    finally:
        a.kill()
        b.kill()


@contextlib.contextmanager
def _behind_a_proxy(target: Path, *, hang_timeout: float):
    """A RemoteEngine whose one worker sits behind a proxy the test can freeze (`hold`)."""
    from delayproxy import DelayProxy

    a = Worker()
    try:
        with DelayProxy(a.endpoint, 0.0) as proxy:
            eng = RemoteEngine(target, rpc=[proxy.endpoint], metrics_log=False, calibration=False,
                               hang_timeout=hang_timeout, connect_timeout=1.0)
            try:
                yield eng, proxy
            finally:
                eng.close()
    finally:
        a.kill()


def test_a_hung_worker_times_out_within_the_bound(split_target):
    """A worker whose connection stays open but answers nothing: RemoteWorkerLost after
    the hang timeout, naming it, instead of a window waiting forever."""
    with _behind_a_proxy(split_target, hang_timeout=2.0) as (eng, proxy):
        assert len(eng.generate("the value", max_tokens=4).tokens) == 4
        proxy.hold()
        t0 = time.monotonic()
        with pytest.raises(RemoteWorkerLost, match=f"RPC worker {proxy.endpoint} stopped answering: nothing came back for 2 s"):
            eng.generate("the value", max_tokens=8)
        took = time.monotonic() - t0
        assert 2.0 <= took < 2.0 + 1.0 + 5.0, took  # timeout + one probe + slack
        assert proxy.held > 0 and not eng._proc.is_alive()


def test_stop_during_a_hung_worker_says_so_within_the_stop_grace_not_the_hang_timeout(loop_target):
    """Stop mid-answer while a worker hangs: a healthy child ends within a step, so silence
    for STOP_GRACE_S (or a few of the slowest steps seen) names the worker, long before
    the 30 s hang timeout; the tokens streamed before Stop were all delivered."""
    from engine.serving.remote_engine import STOP_GRACE_S
    from engine.decoding.cancel import CancelToken

    with _behind_a_proxy(loop_target, hang_timeout=30.0) as (eng, proxy):
        token = CancelToken()
        seen = 0
        t0 = None
        with pytest.raises(RemoteWorkerLost, match=f"RPC worker {proxy.endpoint} stopped answering: "
                                                  f"nothing came back within {STOP_GRACE_S:g} s of Stop"):
            for ev in eng.stream("the", max_tokens=1500, cancel=token):
                seen += ev.kind == "token"
                if seen == 20 and t0 is None:
                    proxy.hold()
                    time.sleep(0.5)  # the child is now blocked inside a pass
                    t0 = time.monotonic()
                    token.cancel()
        took = time.monotonic() - t0
        assert STOP_GRACE_S <= took < STOP_GRACE_S + 3.0 + 5.0, took  # grace + one probe + slack
        assert seen >= 20 and not eng._proc.is_alive()


def test_stop_with_a_healthy_worker_still_ends_cleanly(loop_target):
    """The stop grace only ends a silent child: a stopped answer from live workers ends
    as cancelled, and the engine keeps working."""
    from engine.decoding.cancel import CancelToken

    a = Worker()
    try:
        eng = RemoteEngine(loop_target, rpc=[a.endpoint], metrics_log=False, calibration=False, connect_timeout=1.0)
        try:
            token = CancelToken()
            done = None
            for ev in eng.stream("the", max_tokens=1500, cancel=token):
                if ev.kind == "token" and not token.cancelled:
                    token.cancel()
                if ev.kind == "done":
                    done = ev
            assert done is not None and done.stats.finish_reason == "cancelled"
            assert len(eng.generate("the", max_tokens=6).tokens) == 6
        finally:
            eng.close()
    finally:
        a.kill()


def test_cli_names_a_hung_worker_after_rpc_timeout_and_exits_2(loop_target):
    """`tandem generate --rpc` runs the split target in a child too: a worker that stops
    answering mid-answer is one error line after --rpc-timeout, not a hang."""
    import subprocess
    import sys

    from delayproxy import DelayProxy
    from test_rpc import ROOT, _env

    a = Worker()
    try:
        with DelayProxy(a.endpoint, 0.0) as proxy:
            gen = subprocess.Popen(
                [sys.executable, "-m", "engine.cli", "generate", "the", "--target", str(loop_target), "--rpc", proxy.endpoint,
                 "--rpc-timeout", "2", "--max-tokens", "1900", "--ctx", "2048", "--no-colour"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=ROOT,
            )
            assert gen.stdout.read(20)  # streaming through the worker
            proxy.hold()
            t0 = time.monotonic()
            _, err = gen.communicate(timeout=60)
            took = time.monotonic() - t0
        assert gen.returncode == 2, err
        lines = err.decode().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"tandem: error: RPC worker {proxy.endpoint} stopped answering"), lines
        assert took < 2 + 3 + 10, took
    finally:
        a.kill()


def test_rpc_timeout_option_is_checked(tiny_target):
    import subprocess
    import sys

    from test_rpc import ROOT, _env

    r = subprocess.run([sys.executable, "-m", "engine.cli", "generate", "hi", "--target", str(tiny_target), "--rpc",
                        "127.0.0.1:1", "--rpc-timeout", "0"], capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "--rpc-timeout expects seconds > 0" in r.stderr and "Traceback" not in r.stderr


def test_tandem_serve_with_rpc_answers_then_says_503_when_its_worker_is_lost(split_target):
    """`tandem serve --rpc`: the split target answers over HTTP; a worker killed between
    requests makes the next request a 503 naming it (not a 400 blaming the request), /health
    says so too, and the server itself stays up and stops cleanly."""
    import signal
    import subprocess
    import sys

    import httpx

    from test_rpc import ROOT, _env

    a = Worker()
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "serve", "--target", str(split_target), "--draft", "none",
                             "--rpc", a.endpoint, "--port", str(port), "--ctx", "512"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, proc.stderr.read()
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "tandem serve --rpc did not come up"
            time.sleep(0.2)
        body = {"prompt": "the value of", "max_tokens": 4, "temperature": 0}
        ok = httpx.post(url + "/v1/completions", json=body, timeout=60)
        assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 4
        a.kill()
        lost = httpx.post(url + "/v1/completions", json=body, timeout=60)
        assert lost.status_code == 503, lost.text
        err = lost.json()["error"]
        assert err["code"] == "rpc_worker_lost" and a.endpoint in err["message"] and err["type"] == "server_error"
        health = httpx.get(url + "/health", timeout=5)
        assert health.status_code == 503 and a.endpoint in health.json()["error"]
        assert proc.poll() is None  # still serving (the 503s), until told to stop
    finally:
        a.kill()
        proc.send_signal(signal.SIGINT)
        _, err_text = proc.communicate(timeout=30)
    assert proc.returncode == 0, err_text
    assert "target split over 1 RPC worker(s)" in err_text and "Traceback" not in err_text


def test_tokenising_never_waits_for_an_answer_streaming_through_the_child(loop_target):
    """The chat's token meter tokenises on the GUI thread while an answer streams: it must
    not wait for the pipe the answer holds (the window froze until the answer ended)."""
    import threading

    from engine import Engine

    msgs = [{"role": "user", "content": "the value <|im_end|> of data"}]
    local = Engine(loop_target, metrics_log=False, calibration=False)
    want_chat, want_text = local.tokens_for(msgs, chat=True), local.target.tokenize("the value of", add_special=False)
    want_piece = local.target.detokenize(want_text)
    local.close()
    a = Worker()
    try:
        eng = RemoteEngine(loop_target, rpc=[a.endpoint], metrics_log=False, calibration=False)
        try:
            events = eng.stream("the", max_tokens=5000)
            next(events), next(events)  # the answer is under way and holds the child's pipe
            got: dict = {}

            def meter() -> None:
                got["text"] = eng.target.tokenize("the value of", add_special=False)
                got["chat"] = eng.tokens_for(msgs, chat=True)
                got["piece"] = eng.target.detokenize(got["text"])
                got["eog"] = eng.target.is_eog(got["text"][0])

            t = threading.Thread(target=meter, daemon=True)
            t.start()
            t.join(60)
            assert not t.is_alive(), "tokenising waited for the streaming answer"
            assert got == {"text": want_text, "chat": want_chat, "piece": want_piece, "eog": False}
            events.close()
        finally:
            eng.close()
    finally:
        a.kill()
