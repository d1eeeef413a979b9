"""The draft choice is parsed once (engine/decoding/drafting/choice.py): every caller (the
engine, the CLI, the server, the bench, the race) reads the same keywords the same way."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.decoding.drafting.choice import NO_DRAFT, DraftChoice, DraftKind
from engine.decoding.drafting.lookup_drafter import PromptLookupDrafter
from engine.errors import TandemError


@pytest.mark.parametrize("spec, kind, keyword", [
    (None, DraftKind.NONE, "none"), ("", DraftKind.NONE, "none"), ("None", DraftKind.NONE, "none"),
    ("lookup", DraftKind.LOOKUP, "lookup"), ("LOOKUP", DraftKind.LOOKUP, "lookup"),
    ("models/d.gguf", DraftKind.PATH, None), (Path("d.gguf"), DraftKind.PATH, None),
])
def test_keywords_and_paths(spec, kind, keyword):
    c = DraftChoice.parse(spec)
    assert c.kind is kind and c.keyword == keyword
    assert DraftChoice.parse(c) is c
    if kind is DraftKind.PATH:
        assert c.spec == spec and c.path == Path(spec) and c.key == f"path:{Path(spec).resolve()}"
    else:
        assert c.spec == (None if kind is DraftKind.NONE else "lookup") and c.key == kind.value


def test_loaded_models_and_given_drafters(tiny_draft):
    from engine.llamacpp.llama import Model

    m = Model(tiny_draft)
    try:
        c = DraftChoice.parse(m)
        assert c.kind is DraftKind.MODEL and c.spec is m and c.keyword is None and c.path == m.path
        assert c.key == f"model:{m.path.resolve()}:{id(m)}"
    finally:
        m.close()
    d = PromptLookupDrafter()
    c = DraftChoice.parse(d)
    assert c.kind is DraftKind.DRAFTER and c.key == f"drafter:{id(d)}" and c.keyword is None


def test_anything_else_is_one_clear_line():
    with pytest.raises(TandemError, match="draft_model must be a path, an engine.Model, 'lookup', 'mtp', 'suffix' or None, not int"):
        DraftChoice.parse(3)  # type: ignore[arg-type]
    assert DraftChoice.parse(None) is NO_DRAFT


def test_the_cli_and_the_server_read_the_same_keywords(tiny_draft):
    from engine.cli.common import draft_arg
    from engine.serving.server.config import ServedModel

    assert draft_arg(" Lookup ") == "lookup" and draft_arg("NONE") is None and draft_arg("MTP") == "mtp"
    assert draft_arg(str(tiny_draft)) == Path(tiny_draft)
    eng = SimpleNamespace()
    assert ServedModel(eng, "m", draft="LOOKUP").default_draft == "lookup"
    assert ServedModel(eng, "m", draft="none").default_draft == "none"
    assert ServedModel(eng, "m", draft="mtp").default_draft == "mtp"
    assert ServedModel(eng, "m", draft=None).has_draft_model is False
    served = ServedModel(eng, "m", draft=str(tiny_draft))
    assert served.has_draft_model and served.default_draft == "model"


def test_the_bench_and_the_race_parse_it_too():
    from engine.measure.bench import _draft_name, plan_configs
    from engine.measure.racing import race
    from engine.decoding.request import GenerationRequest

    names = [c.name for c in plan_configs("Lookup", modes=("target", "auto", "lookup"))]
    assert names == ["target", "lookup auto"]  # a lookup draft: no second lookup row
    assert _draft_name(plan_configs("Lookup")) == "lookup"
    assert _draft_name(plan_configs("x/d.gguf")) == "d.gguf"
    mtp = plan_configs("mtp", modes=("target", "fixed", "auto", "lookup"), sweep=(2,))
    assert [c.name for c in mtp] == ["target", "mtp k=2", "mtp auto", "lookup"] and _draft_name(mtp) == "mtp"
    with pytest.raises(TandemError, match="a race needs a draft"):
        race(SimpleNamespace(), GenerationRequest("hi", draft="none"))


def test_labels_name_the_choice_as_the_server_line_does():
    assert DraftChoice.parse(None).label == "no draft"
    assert DraftChoice.parse("Lookup").label == "prompt lookup"
    assert DraftChoice.parse("mtp").label == "the target's MTP head"
    assert DraftChoice.parse(Path("/m/d.Q4.gguf")).label == "draft d.Q4.gguf"


def test_parsing_loads_no_model_code():
    """The CLI and the app read a choice without loading llama.cpp."""
    import subprocess
    import sys

    code = ("import sys; from engine.decoding.drafting.choice import DraftChoice; "
            "DraftChoice.parse('lookup'); DraftChoice.parse('x.gguf'); print('llama_cpp' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stdout + r.stderr
