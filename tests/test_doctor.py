"""`tandem doctor` reports what is there and what to do when something is missing."""

from __future__ import annotations

from engine.cli import doctor
from engine.cli.main import main as cli


def test_doctor_says_how_to_get_the_default_pair(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf"))  # nothing downloaded
    checks = {c.name: c for c in doctor.run_checks()}
    assert checks["python"].ok and checks["llama_cpp_python"].ok
    assert checks["backend"].detail.startswith(("CPU", "CUDA", "Metal", "Vulkan"))
    assert any(n.startswith("device ") for n in checks)
    assert str(tmp_path / "empty-hf") in checks["model store"].detail
    t = checks["default target"]
    assert not t.ok and t.fix == "tandem pull qwen2.5-coder-1.5b"
    rc = cli(["doctor"])
    out = capsys.readouterr().out
    assert rc == 1 and "-> tandem pull qwen2.5-coder-1.5b" in out and "problem(s)" in out


def test_doctor_flags_a_damaged_model_file(tmp_path, monkeypatch):
    from engine.models import catalog, store

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    spec = catalog.load().default.draft.files[0]
    p = store.snapshot_path(spec)
    p.parent.mkdir(parents=True)
    with open(p, "wb") as f:  # right size, wrong bytes
        f.truncate(spec.bytes)
    checks = {c.name: c for c in doctor.run_checks()}
    d = checks["default draft"]
    assert not d.ok and "sha256 mismatch" in d.detail
