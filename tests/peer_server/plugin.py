"""A pytest plugin that points llama.cpp's own server tests (tools/server/tests in the
llama-cpp-python sdist) at `tandem serve` instead of llama-server, without editing them.

Load it with `-p tests.peer_server.plugin` (the repository root on PYTHONPATH) while pytest
runs in the unpacked suite. It replaces:
- `ServerProcess.start`: starts `python -m engine.cli serve` on the test's host and port,
  with its API key, context size, aliases, CORS origin and default temperature, on a local
  model (SmolLM2-135M-Instruct, or TANDEM_PEER_MODEL) instead of their stories260K download,
  and waits for /health (their infill preset gets a tiny generated model with FIM tokens
  instead, as SmolLM2 has none). Options Tandem has no equivalent for are ignored (the tests that
  depend on them are in skips.py). A server whose command line equals the previous one on the
  same port is reused instead of restarted: the suite starts a server per test, and loading
  a model per test would cost most of the time budget on two cores.
- `ServerProcess.stop`: the test lets go of the server; the process stays for reuse and is
  ended when another configuration needs the port, and at the end of the session.
- `ServerPreset.load_all`: nothing to download.
It also skips what skips.py lists, and writes each test's outcome as JSON to
TANDEM_PEER_REPORT (when set) for tests/engine/serving/test_peer_llama_server.py to judge.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from skips import SKIPS, skip_reason  # noqa: E402  (beside this file, not a package)

MODEL_ID = "smollm2-135m-instruct-q4_1"
START_TIMEOUT_S = 60.0
# Which drafter the server speculates with: prompt lookup by default, so the suite exercises
# the speculative path (output must stay the target's); TANDEM_PEER_DRAFT=none for plain decoding.
DRAFT = os.environ.get("TANDEM_PEER_DRAFT", "lookup")

_live: dict[int, tuple[list[str], subprocess.Popen, Path]] = {}  # port -> (command, process, log)
_results: dict[str, dict] = {}


def _model_path() -> str:
    if os.environ.get("TANDEM_PEER_MODEL"):
        return os.environ["TANDEM_PEER_MODEL"]
    sys.path.insert(0, str(ROOT))
    from engine.models.store import find_model

    found = find_model(MODEL_ID)
    if found is None:
        raise pytest.UsageError(f"{MODEL_ID} is not in the model store: run `tandem pull {MODEL_ID} --source mirror`")
    return str(found)


INFILL_REPO = "ggml-org/test-model-stories260K-infill"  # their /infill tests' model (FIM tokens)
_fim_model: list[str] = []


def _fim_model_path() -> str:
    """A tiny generated model with fill-in-the-middle tokens, for the presets that need a FIM
    model (SmolLM2 has none, so /infill would refuse every request): written once per session."""
    if not _fim_model:
        sys.path.insert(0, str(ROOT))
        from engine.models.tinymodel import make_vocab, write_model

        folder = Path(tempfile.mkdtemp(prefix="tandem-peer-fim-"))
        _fim_model.append(str(write_model(folder / "tiny-fim.gguf", vocab=make_vocab(fim=True), name="tiny-fim")))
    return _fim_model[0]


def tandem_command(sp, model: str) -> list[str]:
    """The `tandem serve` command line for one of their ServerProcess configurations."""
    if getattr(sp, "model_hf_repo", None) == INFILL_REPO:
        model = _fim_model_path()
    host = str(sp.server_host).split(",")[0].strip()
    cmd = [sys.executable, "-m", "engine.cli", "serve", "--target", model, "--draft", DRAFT,
           "--host", host, "--port", str(sp.server_port), "--log-level", "warning",
           # llama-server with one model answers to any model name (their tests send
           # "gpt-3.5-turbo"); Tandem does that only when asked
           "--any-model-name"]
    if sp.temperature is not None:
        cmd += ["--temperature", str(sp.temperature)]
    # their slots where a test sets them (else each server chooses for the machine); their n_ctx
    # is shared by the slots and Tandem's --ctx is each slot's, so each slot here holds at least
    # what theirs would (the model here, SmolLM2, spends more tokens on a prompt than theirs)
    if getattr(sp, "n_slots", None):
        cmd += ["--parallel", str(sp.n_slots)]
    if sp.n_ctx:
        cmd += ["--ctx", str(sp.n_ctx)]
    if sp.n_threads:
        cmd += ["--threads", str(sp.n_threads)]
    if sp.api_key:
        cmd += ["--api-key", sp.api_key]
    for alias in (sp.model_alias or "").split(","):
        if alias.strip():
            cmd += ["--alias", alias.strip()]
    # llama-server answers every origin unless --cors-origins narrows it; Tandem answers none
    # unless told, so their default becomes Tandem's '*' (without a key only when said outright)
    origins = [o.strip() for o in (sp.cors_origins or "*").split(",") if o.strip()]
    for origin in origins:
        cmd += ["--cors-origin", origin]
    if "*" in origins and not sp.api_key:
        cmd.append("--allow-any-origin-without-key")
    return cmd


def _end(port: int) -> None:
    entry = _live.pop(port, None)
    if entry is None:
        return
    _, proc, _ = entry
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _healthy(sp) -> bool:
    try:
        headers = {"Authorization": f"Bearer {sp.api_key}"} if sp.api_key else None
        return sp.make_request("GET", "/health", headers=headers, timeout=2).status_code == 200
    except Exception:
        return False


def _start(self, timeout_seconds: float = START_TIMEOUT_S) -> None:
    import utils

    cmd = tandem_command(self, _model_path())
    port = int(self.server_port)
    live = _live.get(port)
    if live is not None and (live[0] != cmd or live[1].poll() is not None):
        _end(port)
        live = None
    if live is None:
        log = Path(tempfile.mkstemp(prefix=f"tandem-serve-{port}-", suffix=".log")[1])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        with open(log, "w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))
        live = _live[port] = (cmd, proc, log)
        print(f"tests: started tandem serve pid={proc.pid}: {' '.join(cmd)}")
    self.process = live[1]
    utils.server_instances.add(self)
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if _healthy(self):
            self.ready = True
            return
        if live[1].poll() is not None:
            tail = live[2].read_text(errors="replace")[-2000:]
            _live.pop(port, None)
            raise RuntimeError(f"tandem serve exited with {live[1].returncode}:\n{tail}")
        time.sleep(0.05)
    raise TimeoutError(f"tandem serve did not answer /health within {timeout_seconds} s")


def _stop(self) -> None:
    import utils

    utils.server_instances.discard(self)
    self.process = None  # the process stays in _live for the next test with this configuration


def pytest_configure(config) -> None:
    rootdir = str(config.rootpath)
    if rootdir not in sys.path:
        sys.path.insert(0, rootdir)
    import utils

    utils.ServerProcess.start = _start
    utils.ServerProcess.stop = _stop
    utils.ServerPreset.load_all = staticmethod(lambda: None)


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        reason = skip_reason(item.nodeid)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"tandem: {reason[0]}: {reason[1]}"))


def pytest_runtest_logreport(report) -> None:
    entry = _results.setdefault(report.nodeid, {"outcome": "passed"})
    if report.failed:
        entry["outcome"] = "failed" if report.when == "call" else "error"
        entry.setdefault("message", str(report.longrepr)[-1500:])
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"
        entry["message"] = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)


def pytest_sessionfinish(session, exitstatus) -> None:
    for port in list(_live):
        _end(port)
    path = os.environ.get("TANDEM_PEER_REPORT")
    if path:
        Path(path).write_text(json.dumps({"results": _results, "skip_keys": sorted(SKIPS)}, indent=1))
