"""llama.cpp's own server tests (tools/server/tests in the llama-cpp-python sdist the set-up
keeps in its cache) run against `tandem serve`: the OpenAI-compatibility files, unpacked into a
temporary folder (never copied into this tree), with tests/peer_server/plugin.py starting
Tandem instead of llama-server. Every test must pass unless tests/peer_server/skips.py lists it
with a reason; a listed test that no longer exists fails too, so the list cannot go stale."""

from __future__ import annotations

import importlib.metadata
import json
import os
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import require_real

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "peer_server"))
from skips import SKIPS  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.real]

# What is OpenAI API behaviour: chat and text completions, auth and CORS, tool calls,
# embeddings, the Responses API; and the llama-server endpoints editors use: /infill,
# /tokenize and /detokenize. Left out: slots, metrics, LoRA, rerank, router, MCP,
# Anthropic/GCP compatibility, vision, speculative settings, ctx shift, sleep.
FILES = ["unit/test_basic.py", "unit/test_security.py", "unit/test_chat_completion.py",
         "unit/test_completion.py", "unit/test_tool_call.py", "unit/test_embedding.py",
         "unit/test_compat_oai_responses.py", "unit/test_infill.py", "unit/test_tokenize.py"]
SUITE_IN_SDIST = "vendor/llama.cpp/tools/server/tests/"
RUN_LIMIT_S = 540  # about 100 s on an idle 2-core machine; a busy one takes several times that
# One of their tests: their CI gives each 60 s on a dedicated machine; beside the full suite and
# two busy loops, test_embedding_multiple_with_fa (a server start and four embeddings) took
# longer twice, so a busy laptop gets three times that.
PEER_TEST_LIMIT_S = 180


def sdist_path() -> Path:
    """Where packaging/install_llama_cpp.sh keeps the source it builds llama.cpp from."""
    version = importlib.metadata.version("llama_cpp_python")
    cache = os.environ.get("TANDEM_SDIST_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tandem" / "sdist")
    return Path(cache) / f"llama_cpp_python-{version}.tar.gz"


def unpack_suite(sdist: Path, dest: Path) -> Path:
    """Their tests folder alone, out of the sdist."""
    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split("/", 1)[0]
        prefix = f"{top}/{SUITE_IN_SDIST}"
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and (m.isfile() or m.isdir())]
        assert members, f"{sdist} has no {SUITE_IN_SDIST}"
        for m in members:
            m.name = m.name[len(prefix):] or "."
        tar.extractall(dest, members=members, filter="data")
    return dest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def covered(key: str, ids: set[str]) -> bool:
    return key in ids or any(i.split("[", 1)[0] == key for i in ids)


@pytest.mark.timeout(RUN_LIMIT_S + 60)
def test_llama_cpp_openai_server_tests_pass_against_tandem_serve(tmp_path):
    require_real("smollm2-135m-instruct-q4_1")
    sdist = sdist_path()
    if not sdist.is_file():
        msg = f"the llama-cpp-python sdist is not in the set-up's cache ({sdist}); packaging/test.sh downloads it"
        if os.environ.get("TANDEM_REQUIRE_REAL"):
            pytest.fail(msg)
        pytest.skip(msg)
    suite = unpack_suite(sdist, tmp_path / "llama-server-tests")
    report = tmp_path / "report.json"
    env = dict(os.environ, PORT=str(free_port()), TANDEM_PEER_REPORT=str(report),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "pytest", "-p", "tests.peer_server.plugin", "-p", "no:cacheprovider",
           "-m", "not slow",  # their CI's default: the slow ones download real models
           "-q", "-rN", "-o", "addopts=", "--timeout", str(PEER_TEST_LIMIT_S), *FILES]
    try:
        run = subprocess.run(cmd, cwd=suite, env=env, capture_output=True, text=True, timeout=RUN_LIMIT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"llama.cpp's server tests did not finish within {RUN_LIMIT_S} s:\n{(e.stdout or '')[-3000:]}")
    assert report.is_file(), f"the peer suite wrote no report (exit {run.returncode}):\n{run.stdout[-3000:]}{run.stderr[-3000:]}"
    results = json.loads(report.read_text())["results"]
    failed = {k: v.get("message", "") for k, v in results.items() if v["outcome"] in ("failed", "error")}
    stale = sorted(k for k in SKIPS if not covered(k, set(results)))
    counts = {o: sum(v["outcome"] == o for v in results.values()) for o in ("passed", "failed", "error", "skipped")}
    by_reason: dict[str, int] = {}
    for v in results.values():
        if v["outcome"] == "skipped":
            why = v.get("message", "")
            # "Skipped: tandem: <category>: <why>" from the plugin; anything else is their own skip
            reason = why.split(": ", 3)[2] if why.startswith("Skipped: tandem: ") else "skipped by the test itself"
            by_reason[reason] = by_reason.get(reason, 0) + 1
    lines = [f"llama.cpp server tests against tandem serve: {counts}; skipped: {by_reason}"]
    print(lines[0])
    lines += [f"FAILED {k}\n    {last_error(msg)}" for k, msg in sorted(failed.items())]
    lines += [f"skips.py lists a test that does not exist: {k}" for k in stale]
    if failed or stale or run.returncode != 0:
        pytest.fail("\n".join(lines) + f"\n(pytest exit {run.returncode})", pytrace=False)
    assert counts["passed"] > 0


def last_error(message: str) -> str:
    """The first `E ` line of a pytest failure: the assertion that failed."""
    errors = [ln[1:].strip() for ln in message.splitlines() if ln.startswith("E ")]
    return (errors[0] if errors else message.strip().splitlines()[-1] if message.strip() else "")[:300]
