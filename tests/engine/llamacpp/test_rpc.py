"""llama.cpp RPC: a target split over two loopback `tandem worker`s and the local CPU.

Everything runs on 127.0.0.1 with tiny generated models. Tests that need the RPC backend
skip when the installed llama_cpp was built without -DGGML_RPC=ON.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.llamacpp import rpc_backend as rpc

ROOT = Path(__file__).resolve().parents[3]


def _has_rpc() -> bool:
    try:
        from engine.llamacpp.ggml_devices import supports_rpc

        return supports_rpc()
    except Exception:
        return False


needs_rpc = pytest.mark.skipif(
    not _has_rpc(),
    reason="the installed llama_cpp has no RPC backend (build it with packaging/install_llama_cpp.sh, which adds -DGGML_RPC=ON)",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class Worker:
    """A `tandem worker` subprocess on a free loopback port; its output goes to a file."""

    def __init__(self, log_dir: Path | None = None) -> None:
        import tempfile

        self.port = free_port()
        self.endpoint = f"127.0.0.1:{self.port}"
        self.log = Path(tempfile.mkstemp(prefix="tandem-worker-", suffix=".log", dir=log_dir)[1])
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "engine.cli", "worker", "--port", str(self.port), "--threads", "1"],
                stdout=out, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT,
            )
        deadline = time.monotonic() + 60
        while "listening on" not in self.banner:  # printed once the server accepts connections
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start: {self.banner}")
            time.sleep(0.05)

    @property
    def banner(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.log.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def split_target(tmp_path_factory, vocab) -> Path:
    """Random weights, 5 layers: enough units for CPU + two workers to each get some."""
    from engine.models.tinymodel import write_model

    return write_model(tmp_path_factory.mktemp("rpc") / "split.gguf", seed=5, n_layer=5, name="split-target", vocab=vocab)


@pytest.fixture(scope="module")
def workers():
    if not _has_rpc():
        pytest.skip("no RPC backend in this llama_cpp build")
    ws = [Worker(), Worker()]
    yield ws
    for w in ws:
        w.kill()


def _wait_idle(endpoint: str, timeout: float = 10.0) -> rpc.WorkerInfo:
    """A worker serves one client at a time: wait until it answers a probe again."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return rpc.probe(endpoint, timeout=1.0)
        except rpc.RpcError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _local_tokens_then_split_engine(target: Path, prompt: str, workers: list[Worker]):
    """Greedy tokens of `target` loaded locally, then an Engine with it split over `workers`."""
    from engine import Engine

    local = Engine(target, metrics_log=False)
    expected = local.generate(prompt, max_tokens=40).tokens
    local.close()
    for w in workers:
        _wait_idle(w.endpoint)
    return expected, Engine(target, metrics_log=False, rpc=[w.endpoint for w in workers])


# -- without a running worker ----------------------------------------------------------------------
def test_endpoints_are_checked_the_way_llama_cpp_parses_them():
    assert rpc.parse_endpoints("127.0.0.1:50052, host:7,127.0.0.1:50052") == ["127.0.0.1:50052", "host:7"]
    for bad, why in [("localhost", "HOST:PORT"), ("h:0", "1..65535"), ("h:x", "not a number"),
                     ("[::1]:5", "IPv6"), ("::1:5", "HOST:PORT"), (" , ", "no RPC endpoint")]:
        with pytest.raises(rpc.RpcError, match=why.replace(".", r"\.")):
            rpc.parse_endpoints(bad)


def test_split_is_proportional_to_free_memory_and_overridable():
    # CPU-only host with 2 GB free, workers with 4 and 2 GB: 6 units (5 layers + output)
    p = rpc.plan_split(5, [], [("w1", 11, 4 * 10**9), ("w2", 12, 2 * 10**9)], 2 * 10**9)
    assert p.devices == [11, 12] and p.n_gpu_layers == 4  # 2 of 6 units stay on the CPU
    assert p.tensor_split == [4e9, 2e9]
    assert [round(f, 3) for _, f in p.shares] == [0.333, 0.444, 0.222]
    q = rpc.plan_split(5, [], [("w1", 11, 1), ("w2", 12, 1)], 1, weights=[0, 1, 1])
    assert q.n_gpu_layers == 6 and q.tensor_split == [1.0, 1.0]
    # with a local GPU the CPU keeps no layers; weights then name the GPU first
    g = rpc.plan_split(5, [("local CUDA0", 7, 8 * 10**9)], [("w1", 11, 8 * 10**9)], 10**9)
    assert g.devices == [7, 11] and g.n_gpu_layers == 6 and g.tensor_split == [8e9, 8e9]
    with pytest.raises(rpc.RpcError, match="expected 3"):
        rpc.plan_split(5, [], [("w1", 11, 1), ("w2", 12, 1)], 1, weights=[1, 1])


def test_probe_of_a_closed_port_is_one_fast_clear_error():
    port = free_port()
    t0 = time.monotonic()
    with pytest.raises(rpc.RpcError, match=f"127.0.0.1:{port}: connection refused"):
        rpc.probe(f"127.0.0.1:{port}")
    assert time.monotonic() - t0 < 2


def test_probe_refuses_a_server_that_is_not_a_matching_rpc_worker():
    """A listener that closes on HELLO (an older rpc-server does) is named, not a crash."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        import threading

        def answer_wrong_version() -> None:
            conn, _ = srv.accept()
            conn.recv(64)
            import struct

            conn.sendall(struct.pack("<Q", 28) + bytes([3, 0, 0, 0]) + bytes(24))
            conn.close()

        t = threading.Thread(target=answer_wrong_version, daemon=True)
        t.start()
        with pytest.raises(rpc.RpcError, match=r"speaks RPC protocol 3\.0\.0, this build speaks 7\."):
            rpc.probe(f"127.0.0.1:{port}")
        t.join(5)


@needs_rpc
def test_wrong_port_on_the_command_line_is_one_line_and_exit_2(tiny_target):
    port = free_port()
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "engine.cli", "generate", "hello", "--target", str(tiny_target),
                        "--rpc", f"127.0.0.1:{port}", "--max-tokens", "4"],
                       capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines == [f"tandem: error: RPC worker 127.0.0.1:{port}: connection refused "
                     f"(is `tandem worker --port {port}` running there?)"]
    assert time.monotonic() - t0 < 30  # the interpreter start dominates; no connect hang


def test_malformed_rpc_option_is_a_usage_error(tiny_target):
    r = subprocess.run([sys.executable, "-m", "engine.cli", "generate", "hi", "--target", str(tiny_target), "--rpc", "nohost"],
                       capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "expected HOST:PORT" in r.stderr and "Traceback" not in r.stderr


# -- with two workers ------------------------------------------------------------------------------
@needs_rpc
def test_worker_reports_endpoint_devices_and_protocol(workers):
    w = workers[0]
    text = w.banner
    assert f"endpoint {w.endpoint}" in text and "RPC protocol 7.0.0" in text and "device CPU" in text
    info = _wait_idle(w.endpoint)
    assert info.version[0] == rpc.PROTO[0] and len(info.devices) == 1 and info.devices[0].free > 0
    assert info.rtt_ms < 1000


@needs_rpc
def test_greedy_split_over_two_workers_and_cpu_equals_local(workers, split_target):
    from engine.llamacpp import llama

    prompt = "the value of the"
    expected, eng = _local_tokens_then_split_engine(split_target, prompt, workers)
    try:
        log = "".join(llama.log_tail)
        for w in workers:  # both workers really hold weights
            assert f"RPC0[{w.endpoint}] model buffer size" in log, log[-2000:]
        shares = eng.rpc.placement(5).shares
        assert [who for who, _ in shares] == ["local CPU"] + [w.endpoint for w in workers]
        assert all(f > 0 for _, f in shares)
        got = eng.generate(prompt, max_tokens=40)
        assert got.tokens == expected
        assert got.stats.steps == got.stats.generated_tokens  # target alone: one pass per token
    finally:
        eng.close()


@needs_rpc
def test_speculative_with_local_draft_equals_local_target_alone(workers, split_target, tiny_draft):
    prompt = "def value(self): return"
    expected, eng = _local_tokens_then_split_engine(split_target, prompt, workers)
    try:
        spec = eng.generate(prompt, draft_model=tiny_draft, lookahead=4, max_tokens=40)
        assert spec.tokens == expected
        assert spec.stats.drafted > 0
        selfdraft = eng.generate(prompt, draft_model=split_target, lookahead=4, max_tokens=40)
        assert selfdraft.tokens == expected and selfdraft.stats.steps < selfdraft.stats.generated_tokens
    finally:
        eng.close()


@needs_rpc
def test_delay_proxy_speculation_needs_fewer_passes_and_round_trips(workers, split_target):
    """5 ms added per round trip in front of one worker: an always-accepting self-draft at
    k=4 pays it once per 5 tokens, target alone once per token. Counted in passes and in the
    proxy's traffic, not in seconds (a busy machine's clock says nothing here; the time it
    saves is measured in docs/benchmarks.md section 6)."""
    from delayproxy import DelayProxy
    from engine import Engine

    for w in workers:
        _wait_idle(w.endpoint)
    with DelayProxy(workers[0].endpoint, 0.005) as proxy:
        eng = Engine(split_target, metrics_log=False, rpc=[proxy.endpoint, workers[1].endpoint])
        try:
            prompt = "the count of items"
            eng.generate(prompt, max_tokens=4)  # warm-up
            eng.generate(prompt, draft_model=split_target, lookahead=4, max_tokens=4)
            before = proxy.chunks
            base = eng.generate(prompt, max_tokens=48)
            between = proxy.chunks
            spec = eng.generate(prompt, draft_model=split_target, lookahead=4, max_tokens=48)
            after = proxy.chunks
        finally:
            eng.close()
    assert spec.tokens == base.tokens
    assert base.stats.steps == 48 and spec.stats.steps <= 48 // 4
    base_trips, spec_trips = between - before, after - between
    assert base_trips > 0 and spec_trips < 0.6 * base_trips, (spec_trips, base_trips)


@needs_rpc
def test_bench_over_workers_reports_the_network_share_of_a_pass(workers, split_target, tmp_path):
    """`tandem bench --rpc`: the same passes measured here alone (by an earlier local run)
    are subtracted from the passes over the workers; before any local run it says how."""
    import json

    suite = tmp_path / "s.txt"
    suite.write_text("the value of\n")
    env = {**_env(), "TANDEM_HOME": str(tmp_path / "home")}
    cmd = [sys.executable, "-m", "engine.cli", "bench", "--target", str(split_target), "--draft", "lookup",
           "--suite", str(suite), "--repeat", "1", "--max-tokens", "12", "--lookahead", "2", "--modes", "target,fixed"]
    eps = ",".join(w.endpoint for w in workers)

    def bench(out: str, *extra: str) -> str:
        for w in workers:
            _wait_idle(w.endpoint)
        r = subprocess.run(cmd + ["--out", str(tmp_path / out), *extra], capture_output=True, text=True, env=env,
                           cwd=ROOT, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        return (tmp_path / out / "summary.md").read_text()

    md = bench("rpc-first", "--rpc", eps)
    assert "## Network (RPC workers)" in md and "Network share unknown" in md
    assert "## Network" not in bench("local")
    md = bench("rpc", "--rpc", eps)
    cost = json.loads((tmp_path / "rpc" / "results.json").read_text())
    local, network = cost["cost"]["local_verify_ms"], cost["cost"]["network_ms"]
    assert local["1"] > 0 and set(network) <= set(cost["cost"]["verify_ms"]) and "1" in network
    assert cost["meta"]["rpc"]["endpoints"] == eps.split(",")
    assert "| n=1 |" in md and "network per token" in md
    rows = cost["rows"]
    assert all(r["network_ms_per_token"] is not None for r in rows), rows


@needs_rpc
def test_killing_a_worker_mid_generation_is_one_line_exit_2_and_leaves_no_mess(tmp_path, vocab):
    """llama.cpp cannot continue without a worker; Tandem names it and exits 2, fast."""
    from engine.models.tinymodel import write_model

    ids = [vocab.id(f"▁{w}") for w in ("the", "value", "of", "data")]
    loop = write_model(tmp_path / "loop.gguf", n_layer=5, vocab=vocab, name="loop",
                       chain={a: b for a, b in zip(ids, ids[1:] + ids[:1])})
    a, b = Worker(), Worker()
    try:
        gen = subprocess.Popen(
            [sys.executable, "-m", "engine.cli", "generate", "the", "--target", str(loop), "--rpc",
             f"{a.endpoint},{b.endpoint}", "--max-tokens", "1900", "--ctx", "2048", "--no-colour"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=ROOT,
        )
        assert gen.stdout.read(20)  # streaming: the target is split and generating
        b.kill()
        t0 = time.monotonic()
        _, err = gen.communicate(timeout=60)
        assert time.monotonic() - t0 < 30
        assert gen.returncode == 2, err
        lines = err.decode().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"tandem: error: RPC worker {b.endpoint} was lost mid-generation"), lines
        # clean state: the surviving worker serves the next client
        assert _wait_idle(a.endpoint).devices
    finally:
        a.kill()
        b.kill()


@needs_rpc
def test_worker_refuses_a_port_in_use_in_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "engine.cli", "worker", "--port", str(port)],
                           capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"tandem: error: cannot listen on 127.0.0.1:{port}: Address already in use"]


@needs_rpc
def test_worker_on_another_address_warns_about_no_authentication():
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "engine.cli", "worker", "--host", "0.0.0.0", "--port", str(port)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
    try:
        line = p.stderr.readline()
        assert "no authentication or encryption" in line and "SSH tunnel" in line
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(10)


def test_fit_counts_the_workers_free_memory_and_keeps_the_draft_local():
    from engine.models import catalog
    from engine.models.hardware import Device, Hardware, pair_fit

    gb = 10**9
    pair = catalog.load().pair("qwen2.5-coder-32b")  # about 20 GB of weights

    def hw(free: float) -> Hardware:
        return Hardware(64 * gb, int(free * gb), 8, 8, [Device("CPU", "cpu", "CPU", "CPU", int(free * gb), int(free * gb))])

    assert pair_fit(pair, hw(8)).verdict == "does not fit"
    fit = pair_fit(pair, hw(8), workers=[("10.0.0.5:50052", 10 * gb), ("10.0.0.6:50052", 10 * gb)])
    assert fit.verdict == "fits across 3 hosts" and fit.ok
    assert "10.0.0.5:50052 10.0 GB" in fit.detail and "this machine 8.0 GB" in fit.detail
    short = pair_fit(pair, hw(8), workers=[("10.0.0.5:50052", 2 * gb)])
    assert short.verdict == "does not fit" and "2.0 GB on 1 worker(s)" in short.detail
    # the draft must fit here even when the workers could hold everything
    assert pair_fit(pair, hw(0.1), workers=[("10.0.0.5:50052", 100 * gb)]).verdict == "does not fit"
    assert pair_fit(pair, hw(100), workers=[("10.0.0.5:50052", 1)]).verdict == "fits in RAM"  # local first


def test_doctor_reports_whether_rpc_is_in_this_build():
    from engine.cli import doctor

    c = doctor._rpc_check()
    assert c.ok and c.name == "rpc"
    assert ("available (protocol 7.0.0)" in c.detail) == _has_rpc()
    assert _has_rpc() or "-DGGML_RPC=ON" in c.detail
