"""pydantic-ai runs a tool end to end against `tandem serve`: the agent offers its function,
the model's `<tool_call>` comes back as an OpenAI tool call, the agent runs the function and
sends its result, and the model's text answer is the agent's output. The model is a tiny
scripted one: it calls the tool when the conversation ends with the user's question, and
answers in text when it ends with the tool's result (its chat template tells it which)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

from engine import Engine  # noqa: E402
from engine.models.tinymodel import NORMAL, Vocab, make_vocab, write_model  # noqa: E402

CALL = ["<tool_call>", '\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n', "</tool_call>"]
ANSWER = "It is sunny in Paris today."
# ChatML, but the assistant's turn opens with '=' after a tool result (Tandem hands results to a
# template without tool support as a user message in <tool_response> tags)
TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% if '<tool_response>' in messages[-1]['content'] %}{{ '=' }}{% endif %}{% endif %}"
)


def write_agent_model(folder):
    base = make_vocab()
    extra = CALL + [ANSWER]
    vocab = Vocab(base.tokens + extra, base.scores + [0.0] * len(extra), base.types + [NORMAL] * len(extra))
    ids = {text: len(base.tokens) + i for i, text in enumerate(extra)}
    end = vocab.id("<|im_end|>")
    call = [vocab.byte(10)] + [ids[t] for t in CALL] + [end]
    chain = {a: b for a, b in zip(call, call[1:])}
    chain[vocab.id("=")] = ids[ANSWER]  # "=" is a word of the tiny vocabulary
    chain[ids[ANSWER]] = end
    return write_model(folder / "agent.gguf", vocab=vocab, chain=chain, name="agent", chat_template=TEMPLATE)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from engine.serving.server import ServedModel, ServerConfig, ServerThread, create_app

    target = write_agent_model(tmp_path_factory.mktemp("pydantic_ai"))
    eng = Engine(target, n_ctx=2048, metrics_log=False)
    app = create_app(ServedModel(eng, "agent", draft="lookup"), ServerConfig(list_catalog=False))
    srv = ServerThread(app).start()
    yield SimpleNamespace(url=srv.url)
    srv.stop()
    eng.close()


def agent(served) -> tuple[Agent, list[str]]:
    model = OpenAIChatModel("agent", provider=OpenAIProvider(base_url=served.url + "/v1", api_key="unused"))
    asked: list[str] = []
    a = Agent(model, model_settings={"temperature": 0.0, "max_tokens": 64})

    @a.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        asked.append(city)
        return f"sunny in {city}"

    return a, asked


def test_a_pydantic_ai_agent_runs_the_tool_and_gets_the_answer(served):
    a, asked = agent(served)
    result = a.run_sync("What is the weather in Paris?")
    assert asked == ["Paris"]
    assert result.output == ANSWER
    kinds = [part.part_kind for m in result.all_messages() for part in m.parts]
    assert kinds.count("tool-call") == 1 and kinds.count("tool-return") == 1


@pytest.mark.anyio
async def test_the_same_run_streamed(served):
    a, asked = agent(served)
    async with a.run_stream("What is the weather in Paris?") as run:
        text = await run.get_output()
    assert asked == ["Paris"] and text == ANSWER
