"""Issue 27, the smaller cases: API type errors name their argument, model paths that are
not files say what they are, an unknown tensor type names the file, and chat templates warn
on blocked attributes and stop writing once the prompt cannot fit."""

from __future__ import annotations

import os
import struct
import warnings

import pytest

from engine import Engine
from engine.errors import ModelFileError, PromptTooLong, TandemError
from engine.models.gguf_header import read_header, validate_file


# -- 8. API type errors name the argument --------------------------------------------------------
@pytest.mark.parametrize("kw,says", [
    ({"stop": 5}, "stop must be a string or a list of strings, got int"),
    ({"stop": ["a", 3]}, "stop must be a string or a list of strings, got a list holding int"),
    ({"chat": "yes"}, "chat must be True or False"),
    ({"system": 3}, "system must be a string or None, got int"),
    ({"tag": ["x"]}, "tag must be a string or None, got list"),
    ({"max_tokens": "9"}, "max_tokens must be an integer"),
    ({"temperature": "hot"}, "temperature must be a number"),
    ({"lookahead": [1]}, "lookahead"),
])
def test_every_api_type_error_names_its_argument(tiny_target, kw, says):
    eng = Engine(tiny_target, n_ctx=256, metrics_log=False)
    try:
        with pytest.raises(TandemError) as e:
            eng.generate("the value", max_tokens=kw.pop("max_tokens", 4), **kw)
        assert says in str(e.value), str(e.value)
        assert "not iterable" not in str(e.value)
    finally:
        eng.close()


# -- model paths that are not files -----------------------------------------------------------------
def test_a_fifo_given_as_a_model_is_named_a_fifo(tmp_path):
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    with pytest.raises(ModelFileError, match=r"model\.gguf: is a named pipe \(FIFO\), not a file"):
        read_header(fifo)  # and returns at once: a FIFO would block the read


def test_a_symlink_loop_and_a_dangling_link_are_named(tmp_path):
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    os.symlink(b, a)
    os.symlink(a, b)
    with pytest.raises(ModelFileError, match="a.gguf: is a symbolic link loop"):
        read_header(a)
    dangling = tmp_path / "d.gguf"
    os.symlink(tmp_path / "gone.gguf", dangling)
    with pytest.raises(ModelFileError, match=r"d.gguf: is a symbolic link to .*gone.gguf, which does not exist"):
        read_header(dangling)
    with pytest.raises(ModelFileError, match="no such file"):
        read_header(tmp_path / "nothing.gguf")


def test_an_unknown_tensor_type_names_the_file(tiny_target, tmp_path):
    data = bytearray(tiny_target.read_bytes())
    t = read_header(tiny_target).tensors[0]
    name = t.name.encode()
    info = struct.pack("<Q", len(name)) + name + struct.pack("<I", len(t.shape)) + b"".join(
        struct.pack("<Q", d) for d in t.shape)
    at = bytes(data).index(info) + len(info)
    data[at:at + 4] = struct.pack("<I", 999)
    bad = tmp_path / "odd-types.gguf"
    bad.write_bytes(bytes(data))
    with pytest.raises(ModelFileError) as e:
        validate_file(bad)
    assert str(e.value).startswith(f"{bad}: ") and "unknown tensor type 999" in str(e.value)


# -- chat templates -----------------------------------------------------------------------------------
def test_blocked_attribute_access_warns_and_falls_back_like_other_refusals():
    from engine.decoding.prompting.chat import ChatTemplateWarning, render

    sneaky = "{{ messages.__class__.__mro__ }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text = render([{"role": "user", "content": "hi"}], sneaky, source="evil.gguf")
    msgs = [str(w.message) for w in caught if issubclass(w.category, ChatTemplateWarning)]
    assert msgs and "evil.gguf" in msgs[0] and "__class__" in msgs[0] and "ChatML" in msgs[0]
    assert text.startswith("<|im_start|>user\nhi")


def test_template_output_is_bounded_by_what_the_context_can_hold(tiny_target):
    """A template that writes megabytes stops at what the context could hold (characters per
    token bounded by the vocabulary), and a conversation too long for ChatML too is refused."""
    from engine.decoding.prompting.chat import ChatTemplateWarning, chat_tokens
    from engine.llamacpp.llama import load_model

    model = load_model(tiny_target)
    try:
        budget = 256 * model.max_token_bytes
        model_template = "{% for i in range(100) %}{% for j in range(100) %}{{ 'x' * 900 }}{% endfor %}{% endfor %}"
        model.header.metadata["tokenizer.chat_template"] = model_template
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            toks = chat_tokens(model, [{"role": "user", "content": "the value"}], limit=256)
        assert any(issubclass(w.category, ChatTemplateWarning) and f"{budget:,}" in str(w.message) for w in caught), [
            str(w.message) for w in caught]
        assert len(toks) < 256  # ChatML, which fits
        with pytest.raises(PromptTooLong):
            chat_tokens(model, [{"role": "user", "content": "the value " * 5000}], limit=256)
    finally:
        model.close()
