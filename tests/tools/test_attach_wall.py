"""tools/attach_wall.py (issue #47's documents check, a `tandem generate --attach` process per run)
on the tiny target: the suite's prompts split back into file and question, both configurations
run interleaved as real processes, the texts compared and the table summed per kind."""

from __future__ import annotations

import json

import pytest

from engine.documents.blocks import attachment_block, with_attachments
from tools import attach_wall


@pytest.fixture
def suite(tmp_path):
    doc = "the value of the list and the data " * 12
    lines = [{"id": f"d-{k}", "kind": k, "prompt": with_attachments(q, [attachment_block("doc.txt", doc)])}
             for k, q in (("quote", "Quote the value."), ("summary", "Sum it up."))]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path, doc


def test_the_suites_prompts_split_back_into_the_file_and_the_question(suite):
    path, doc = suite
    asked = attach_wall.questions(str(path))
    assert [(a.id, a.kind, a.name, a.question) for a in asked] == [("d-quote", "quote", "doc.txt", "Quote the value."),
                                                                   ("d-summary", "summary", "doc.txt", "Sum it up.")]
    assert all(a.text == doc for a in asked)
    # and the CLI's --attach lays them out again as the suite did
    assert with_attachments(asked[0].question, [attachment_block(asked[0].name, asked[0].text)]) == \
        json.loads(path.read_text().splitlines()[0])["prompt"]


@pytest.mark.parametrize("home", ["cold", "warm"])
def test_it_times_both_configurations_as_processes_and_sums_each_kind(tiny_target, suite, tmp_path, home, capsys):
    path, _ = suite
    out = tmp_path / "out"
    assert attach_wall.main(["--target", str(tiny_target), "--suite", str(path), "--repeat", "1",
                             "--max-tokens", "8", "--home", home, "--out", str(out)]) == 0
    got = json.loads((out / "runs.json").read_text())
    runs = got["runs"]
    assert sorted((r["id"], r["config"]) for r in runs) == [("d-quote", "auto"), ("d-quote", "target"),
                                                             ("d-summary", "auto"), ("d-summary", "target")]
    assert all(r["wall_s"] > r["ttft_s"] > 0 and r["tokens"] > 0 for r in runs)
    assert all(r["same_text"] is True for r in runs if r["config"] == "auto")  # greedy: the target's text
    assert [r["kind"] for r in got["summary"]] == ["quote", "summary"]
    assert "| quote | 1 |" in capsys.readouterr().out


def test_a_prompt_that_is_not_one_attached_document_is_refused(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "x", "prompt": "no document here"}) + "\n")
    with pytest.raises(SystemExit, match="x is not one attached document"):
        attach_wall.questions(str(path))


def test_margins_name_where_a_differing_text_parts(tiny_target, suite, tmp_path):
    """A run made to differ (its last token changed): --margins says where, with the target's margin."""
    path, _ = suite
    asked = attach_wall.questions(str(path))[:1]
    runs = attach_wall.measure(["--target", str(tiny_target), "--draft", "lookup"], asked, 1, 6, "cold")
    auto = next(r for r in runs if r.config == "auto")
    target = next(r for r in runs if r.config == "target")
    assert auto.ids == target.ids and len(auto.ids) == 6
    attach_wall.margins(str(tiny_target), asked, runs)
    assert auto.parted is None  # the same: nothing to say
    auto.ids = auto.ids[:-1] + [(auto.ids[-1] + 1) % 300]
    attach_wall.margins(str(tiny_target), asked, runs)
    assert auto.parted is not None and "outputs part at token 5" in auto.parted and "margin" in auto.parted


def test_a_text_that_stops_early_parts_at_its_end_with_the_margin_there(tiny_target, suite, tmp_path):
    """One answer the other's start (it wrote its end-of-generation token where the other went
    on, as a near-tie between ending and one more word can go): --margins names the place, the
    end token and the target's margin there, as for any other difference."""
    path, _ = suite
    asked = attach_wall.questions(str(path))[:1]
    runs = attach_wall.measure(["--target", str(tiny_target), "--draft", "lookup"], asked, 1, 6, "cold")
    auto = next(r for r in runs if r.config == "auto")
    auto.ids = auto.ids[:4]
    attach_wall.margins(str(tiny_target), asked, runs)
    assert auto.parted is not None and "outputs part at token 4" in auto.parted and "margin" in auto.parted
