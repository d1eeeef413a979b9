"""`tandem generate --json-schema / --grammar-file`: the answer follows the constraint, greedy
output is the same with a draft model, with prompt lookup and with none, and a bad constraint
is one line before any model loads."""

from __future__ import annotations

import json
import re

import pytest

from engine.cli.main import main

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                                           "b": {"enum": ["the", "value"]}},
          "required": ["a", "b"], "additionalProperties": False}
GRAMMAR = 'root ::= "the" (" " ("value" | "of" | "item" | [a-z]+))+ "."\n'


def generate(capsys, *argv: str) -> dict:
    assert main(["generate", "the value of", "--max-tokens", "60", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def grammar_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("grammar") / "words.gbnf"
    path.write_text(GRAMMAR)
    return path


@pytest.mark.parametrize("kind", ["schema", "grammar"])
def test_constrained_greedy_output_is_the_same_with_and_without_a_draft(capsys, tiny_target, tiny_draft, grammar_file,
                                                                        tmp_path, kind):
    if kind == "grammar":
        options = [["--grammar-file", str(grammar_file)]] * 3
    else:  # the schema as text, and from a file
        (tmp_path / "s.json").write_text(json.dumps(SCHEMA))
        options = [["--json-schema", json.dumps(SCHEMA)], ["--json-schema", f"@{tmp_path / 's.json'}"]] * 2
    alone = generate(capsys, "--target", str(tiny_target), *options[0])
    for draft, option in ((str(tiny_draft), options[1]), ("lookup", options[2])):
        fast = generate(capsys, "--target", str(tiny_target), "--draft", draft, "--lookahead", "4", *option)
        assert fast["tokens"] == alone["tokens"] and fast["text"] == alone["text"]
        assert fast["stats"]["drafted"] > 0
    if kind == "grammar":  # the tiny model writes words at random: only the grammar keeps this shape
        assert re.fullmatch(r"the( [a-z]+)+\.?", alone["text"]), alone["text"]
    else:
        assert alone["stats"]["finish_reason"] == "stop"
        answer = json.loads(alone["text"])
        assert set(answer) == {"a", "b"} and 0 <= answer["a"] <= 99 and answer["b"] in ("the", "value")


@pytest.mark.parametrize("option, needle", [
    (["--json-schema", '{"type": "integer", "minimum": 5, "maximum": 1}'], "--json-schema: 'minimum'"),
    (["--json-schema", "{bad"], "--json-schema: not JSON"),
    (["--json-schema", "[1]"], "--json-schema: a schema is a JSON object"),
    (["--json-schema", "@/no/such/schema.json"], "--json-schema /no/such/schema.json: no such file"),
    (["--grammar-file", "/no/such/file.gbnf"], "--grammar-file /no/such/file.gbnf: no such file"),
    (["--grammar-file", "BROKEN"], "--grammar-file is not a valid GBNF grammar"),
])
def test_a_bad_constraint_is_one_line_before_any_model_loads(capsys, tmp_path, option, needle):
    if option[1] == "BROKEN":
        (tmp_path / "bad.gbnf").write_text('root ::= "yes" | "no')
        option = ["--grammar-file", str(tmp_path / "bad.gbnf")]
    # the target does not exist: the constraint is refused before the model would be looked for
    assert main(["generate", "x", "--target", str(tmp_path / "missing.gguf"), *option]) == 2
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("tandem: error:")]
    assert len(errors) == 1 and needle in errors[0], errors
