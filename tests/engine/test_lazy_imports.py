"""Commands that run no model never load libllama: `import engine` stays light, listing and
fetching models works without llama.cpp, and `tandem doctor` still answers when llama_cpp
cannot be imported at all. Each command runs in a fresh interpreter (this one has long
since loaded llama_cpp) that reports what it loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from fakehub import fakehub, write_tiny_catalog  # noqa: F401  (fixture)

PROBE = r"""
import json, os, sys
if os.environ.get("PROBE_NO_LLAMA_CPP"):
    sys.modules["llama_cpp"] = None  # imports of llama_cpp now fail, as when it is not installed
from engine.cli.main import main
rc = main(sys.argv[1:])
maps = open("/proc/self/maps").read() if os.path.exists("/proc/self/maps") else ""
print("PROBE " + json.dumps({"rc": rc, "llama_cpp": sys.modules.get("llama_cpp") is not None,
                             "libllama": "libllama" in maps}))
"""


def run_cli(*args: str, no_llama_cpp: bool = False) -> tuple[dict, str, str]:
    """`tandem ARGS` in a fresh interpreter: (what it loaded and its exit code, stdout, stderr)."""
    env = dict(os.environ)
    if no_llama_cpp:
        env["PROBE_NO_LLAMA_CPP"] = "1"
    r = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120, env=env)
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("PROBE ")]
    assert lines, r.stdout + r.stderr
    out = r.stdout.replace(lines[-1], "")
    return json.loads(lines[-1][len("PROBE "):]), out, r.stderr


def assert_light(probe: dict) -> None:
    assert not probe["llama_cpp"], "llama_cpp was imported"
    assert not probe["libllama"], "libllama was loaded"


def test_import_engine_loads_neither_llama_cpp_nor_numpy():
    code = "import sys, engine; engine.TandemError; print(sorted(m for m in ('llama_cpp', 'numpy') if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def test_public_names_still_import_from_engine():
    code = ("import sys, engine; from engine import Engine, SamplingParams, RunStats, check_pair; "
            "assert set(engine.__all__) <= set(dir(engine)); print(Engine.__module__, 'llama_cpp' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["engine.decoding.engine", "True"], r.stdout + r.stderr


def test_models_lists_devices_without_llama(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    probe, out, _ = run_cli("models")
    assert probe["rc"] == 0 and "backend " in out and "not downloaded" in out, out
    assert_light(probe)


def test_pull_without_llama(fakehub, tiny_target, tmp_path, monkeypatch):
    fakehub.add("tiny-org/tiny-GGUF", "t.gguf", tiny_target)
    monkeypatch.setenv("TANDEM_CATALOG", str(write_tiny_catalog(tmp_path, fakehub.spec("tiny-org/tiny-GGUF", "t.gguf"))))
    probe, _, err = run_cli("pull", "tiny", "--source", "hub")
    assert probe["rc"] == 0 and "pair tiny is ready" in err, err
    assert_light(probe)


def test_check_import_and_stats_without_llama(tiny_target, tiny_draft, tmp_path):
    probe, out, _ = run_cli("check", str(tiny_target), str(tiny_draft))
    assert probe["rc"] == 0 and "compatible" in out
    assert_light(probe)
    probe, out, _ = run_cli("import", str(tiny_draft))
    assert probe["rc"] == 0 and "imported" in out
    assert_light(probe)
    log = tmp_path / "metrics.jsonl"
    log.write_text("")
    probe, _, _ = run_cli("stats", "--log", str(log))
    assert probe["rc"] == 0
    assert_light(probe)


def test_doctor_without_llama_cpp_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    probe, out, _ = run_cli("doctor", no_llama_cpp=True)
    assert probe["rc"] == 1, out
    assert "!! llama.cpp build" in out and "-> bash packaging/install_llama_cpp.sh" in out, out
    assert_light(probe)


def test_the_probe_sees_llama_when_a_command_needs_it(tmp_path, monkeypatch):
    """The checks above can fail: doctor with llama.cpp installed does load it."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    probe, out, _ = run_cli("doctor")
    assert probe["rc"] in (0, 1) and "ok backend" in out, out
    assert probe["llama_cpp"] and (probe["libllama"] or not os.path.exists("/proc/self/maps"))
