"""The release workflow (.github/workflows/release.yml) is valid YAML for GitHub Actions with
the matrix the downloads need, and every job builds, self-tests and uploads. It cannot run
here; this checks what can be checked without GitHub."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


def _load() -> dict:
    doc = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(doc, dict)
    return doc


def test_the_workflow_runs_on_tags_and_by_hand():
    doc = _load()
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` as true
    assert on["push"]["tags"] == ["v*"] and "workflow_dispatch" in on


def test_the_matrix_covers_linux_macos_arm_and_windows_cpu_and_cuda():
    job = _load()["jobs"]["bundle"]
    entries = job["strategy"]["matrix"]["include"]
    pairs = {(e["os"].split("-")[0], e["backend"]) for e in entries}
    assert {("ubuntu", "cpu"), ("ubuntu", "cuda"), ("macos", "metal"), ("windows", "cpu"), ("windows", "cuda")} <= pairs
    assert any(e["os"] == "macos-14" for e in entries)  # Apple silicon
    assert len({e["name"] for e in entries}) == len(entries)
    for e in entries:
        if e["backend"] != "metal":  # every x86-64 bundle carries all CPU variants
            assert "-DGGML_BACKEND_DL=ON" in e["cmake_args"] and "-DGGML_CPU_ALL_VARIANTS=ON" in e["cmake_args"]
    used = set(re.findall(r"\$\{\{\s*matrix\.(\w+)", WORKFLOW.read_text()))
    assert used <= set(entries[0]), used - set(entries[0])


def test_every_job_builds_self_tests_with_a_real_model_and_uploads():
    steps = _load()["jobs"]["bundle"]["steps"]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "packaging/tandem.spec" in runs and "--self-test" in runs and '--self-test "$model"' in runs
    assert "packaging/deb.sh" in runs
    uses = [s["uses"] for s in steps if "uses" in s]
    assert all(re.fullmatch(r"[\w.-]+/[\w.-]+@v[\w.]+", u) for u in uses), uses  # every action pinned
    assert any(u.startswith("actions/upload-artifact@") for u in uses)
    for path in re.findall(r"packaging/[\w.]+\.(?:sh|spec)", runs):
        assert (ROOT / path).exists(), path
