"""Vision projectors before anything loads: the catalog's `projector` entries, downloaded with
their model; a target's projector found beside it or through the catalog; its header checked
against the target's; and `tandem check`'s pictures line."""

from __future__ import annotations

import copy
import tomllib

import gguf
import pytest

from engine.models import catalog, download, store
from engine.models.catalog import CATALOG_PATH, CatalogError
from engine.models.gguf_header import read_header
from engine.models.projector import catalog_projector, find_projector, projector_beside, projector_fit
from engine.models.tiny_projector import write_projector
from fakehub import fakehub, write_tiny_catalog  # noqa: F401  (fixture)

TARGET_REPO, TARGET_FILE = "tiny-org/tiny-seeing-GGUF", "tiny-seeing-q8_0.gguf"
PROJ_FILE = "mmproj-tiny-seeing-F16.gguf"


def test_the_projector_beside_a_target_is_the_only_one_or_the_one_named_after_it(tmp_path):
    target = tmp_path / "Qwen3.5-4B-Q4_K_M.gguf"
    target.write_bytes(b"")
    assert projector_beside(target) is None
    (tmp_path / "mmproj-Qwen3.5-4B-F16.gguf").write_bytes(b"")
    assert projector_beside(target).name == "mmproj-Qwen3.5-4B-F16.gguf"
    (tmp_path / "mmproj-gemma-4-E2B-F16.gguf").write_bytes(b"")
    assert projector_beside(target).name == "mmproj-Qwen3.5-4B-F16.gguf"  # named after the target
    (tmp_path / "mmproj-Qwen3.5-4B-BF16.gguf").write_bytes(b"")
    assert projector_beside(target) is None  # two fit: the user says which (--mmproj)


# -- the catalog ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def raw():
    with open(CATALOG_PATH, "rb") as f:
        return tomllib.load(f)


def test_the_catalog_names_projectors_for_models_that_see(raw):
    cat = catalog.parse(raw)
    seeing = [m for m in cat.models.values() if m.projector is not None]
    assert len(seeing) >= 2, "the catalog names at least two projector files"
    for m in seeing:
        p = m.projector
        assert p.filename.lower().startswith("mmproj") and p.filename.endswith(".gguf")
        assert p.repo.count("/") == 1 and len(p.revision) == 40 and p.sha256 and len(p.sha256) == 64
        assert m.bytes == m.weights_bytes + p.bytes and m.downloads[-1] is p
    assert all(m.projector is None for m in (cat.default.target, cat.default.draft)), "the default pair reads text"


def test_a_projector_entry_is_checked_like_a_file(raw):
    bad = copy.deepcopy(raw)
    mid, model = next(iter(bad["models"].items()))
    good = {"filename": "mmproj-x-F16.gguf", "bytes": 10, "sha256": "a" * 64}
    model["projector"] = dict(good)
    parsed = catalog.parse(bad).models[mid]
    assert parsed.projector.filename == "mmproj-x-F16.gguf" and parsed.projector.revision == parsed.revision
    model["projector"] = dict(good, revision="b" * 40)
    assert catalog.parse(bad).models[mid].projector.revision == "b" * 40  # another revision of the repo
    for change, message in (({"sha256": None}, "missing 'sha256'"), ({"filename": "vision.gguf"}, "not named mmproj"),
                            ({"bytes": 0}, "bytes must be positive"), ({"sha256": "X"}, "sha256 must be"),
                            ({"mirrors": [{"kind": "pypi-chunks"}]}, "projectors have no mirror")):
        entry = {k: v for k, v in dict(good, **change).items() if v is not None}
        model["projector"] = entry
        with pytest.raises(CatalogError, match=message) as e:
            catalog.parse(bad)
        assert mid in str(e.value) and "projector" in str(e.value)
    model["projector"] = "mmproj-x.gguf"
    with pytest.raises(CatalogError, match="projector: must be a table"):
        catalog.parse(bad)


# -- a projector's header against its target's ----------------------------------------------------


def test_a_projector_fits_the_target_whose_embedding_width_it_projects_to(tiny_vision, tmp_path):
    target, proj = tiny_vision
    th = read_header(target, with_tensors=False)
    fit = projector_fit(th, read_header(proj, with_tensors=False), proj.name)
    assert fit.ok and "qwen3vl_merger" in fit.line and "projects to 64 = the target's embedding width" in fit.line

    other = write_projector(tmp_path / "mmproj-wide.gguf", text_embd=96)
    fit = projector_fit(th, read_header(other, with_tensors=False), other.name)
    assert not fit.ok and fit.line == ("mmproj-wide.gguf (qwen3vl_merger) projects to 96 wide embeddings but the "
                                       "target's are 64: it belongs to another model")
    fit = projector_fit(th, th, target.name)
    assert not fit.ok and "a 'qwen35' model, not a projector" in fit.line

    audio = tmp_path / "mmproj-audio.gguf"
    w = gguf.GGUFWriter(str(audio), "clip")
    w.add_bool("clip.has_vision_encoder", False)
    w.add_bool("clip.has_audio_encoder", True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    fit = projector_fit(th, read_header(audio, with_tensors=False), audio.name)
    assert not fit.ok and fit.line == "mmproj-audio.gguf has audio only: it reads no pictures"


# -- `tandem check`'s pictures line ----------------------------------------------------------------


def test_check_says_whether_a_local_target_sees(tiny_vision, tiny_target, tmp_path, capsys):
    from engine.cli.main import main

    target, proj = tiny_vision
    assert main(["check", str(target), str(target)]) == 0
    out = capsys.readouterr().out
    assert f"pictures: sees: {proj.name} (qwen3vl_merger) projects to 64" in out

    assert main(["check", str(tiny_target), str(tiny_target)]) == 0
    assert "pictures: text only: no projector (mmproj*.gguf) beside it; give one with --mmproj FILE" in \
        capsys.readouterr().out

    wide = write_projector(tmp_path / "mmproj-wide.gguf", text_embd=96)
    assert main(["check", str(target), str(target), "--mmproj", str(wide)]) == 1  # asked, and it does not fit
    out = capsys.readouterr().out
    assert "compatible: the draft can speculate" in out
    assert "pictures: cannot see with " in out and "it belongs to another model" in out
    assert main(["check", str(target), str(target), "--mmproj", str(tmp_path / "none.gguf")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tandem: error: --mmproj") and len(err.strip().splitlines()) == 1


def test_a_catalog_projector_is_downloaded_with_its_model_and_found_for_it(fakehub, tiny_vision, tmp_path,
                                                                         monkeypatch, capsys):
    """The projector at a revision of its own lands in another snapshot folder than the target:
    found through the catalog, not beside it."""
    from engine.cli.main import main

    target, proj = tiny_vision
    fakehub.add(TARGET_REPO, TARGET_FILE, target)
    fakehub.add(TARGET_REPO, PROJ_FILE, proj, commit="c" * 40)
    tspec, pspec = fakehub.spec(TARGET_REPO, TARGET_FILE), fakehub.spec(TARGET_REPO, PROJ_FILE)
    monkeypatch.setenv("TANDEM_CATALOG", str(write_tiny_catalog(tmp_path, tspec, projector=pspec)))
    cat = catalog.load()
    assert cat.models["tiny-target"].projector == pspec
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "code,images" in out and "images: the target reads pictures" in out

    assert main(["check", "tiny-target", "tiny-target"]) == 0
    assert (f"pictures: sees once downloaded: the catalog names {PROJ_FILE}" in capsys.readouterr().out)

    assert main(["pull", "tiny-target", "--source", "hub"]) == 0
    capsys.readouterr()
    got = store.find_file(pspec, verify=True)
    assert got is not None and store.model_state(cat.models["tiny-target"]) == "verified"
    local = store.find_model("tiny-target")
    assert got.parent != local.parent and projector_beside(local) is None
    assert catalog_projector(local) == got and find_projector(local) == got
    assert main(["check", "tiny-target", "tiny-target"]) == 0
    assert f"pictures: sees: {PROJ_FILE} (qwen3vl_merger)" in capsys.readouterr().out

    # a model on disk without its projector is still ready to run text, and does not see
    store.delete_model(cat.models["tiny-target"])
    download.obtain(tspec)
    assert store.model_state(cat.models["tiny-target"]) != "missing"
    assert find_projector(store.find_model("tiny-target")) is None
