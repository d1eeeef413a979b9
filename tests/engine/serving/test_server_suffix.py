"""A run of similar requests on one server with "draft": "suffix": exactly what "draft": "none"
writes, and drafted from the earlier answers once there are some (the real SmolLM2)."""

from __future__ import annotations

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402

RECORDS = [
    "Ann Lee, 34, lives in Oslo and works as a nurse.",
    "Bo Chan, 51, lives in Lyon and works as a baker.",
    "Cy Diaz, 27, lives in Quito and works as a pilot.",
    "Di Evans, 45, lives in Perth and works as a judge.",
]
ASK = 'Extract the record as JSON with the keys "name", "age", "city" and "job". Reply with the JSON only.\n\n'


def test_similar_requests_draft_from_earlier_answers_and_write_what_the_target_writes():
    from conftest import require_real

    from engine.serving.server import ServedModel, ServerThread, create_app

    path = require_real("smollm2-135m-instruct-q4_1")
    eng = Engine(path, n_ctx=1024, metrics_log=False, calibration=False, history_draft=False)
    try:
        app = create_app(ServedModel(eng, "smollm2", draft="suffix", lookahead=8))
        with ServerThread(app) as srv:
            c = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=120)

            def ask(record: str, draft: str):
                return c.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": ASK + record}],
                                                 max_tokens=48, temperature=0, extra_body={"draft": draft})

            accepted = []
            for record in RECORDS:
                plain, fast = ask(record, "none"), ask(record, "suffix")
                assert fast.choices[0].message.content == plain.choices[0].message.content
                t = fast.model_extra["timings"]
                assert t["draft"] == "suffix"
                accepted.append(t["draft_n_accepted"] / max(1, fast.usage.completion_tokens))
        # from the third request on, much of each answer comes from the earlier ones
        assert min(accepted[2:]) > 0.3 and min(accepted[2:]) > accepted[0], accepted
    finally:
        eng.close()
