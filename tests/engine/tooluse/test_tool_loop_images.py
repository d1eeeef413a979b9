"""The tool loop with pictures (#49): each step's prompt keeps the request's pictures in their
places, so a chat with a picture and tools on answers as the engine does without the loop."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("PIL")

from engine import Engine  # noqa: E402
from engine.decoding.request import GenerationRequest  # noqa: E402
from engine.documents.images import MEDIA_MARKER, ImageInput  # noqa: E402
from engine.tooluse.loop import AGENT_SYSTEM, LoopDone, ToolLoop  # noqa: E402
from engine.tooluse.toolset import Allowance  # noqa: E402
from image_files import png_bytes  # noqa: E402

PICTURE = ImageInput(png_bytes(32, 32, seed=3))


@pytest.mark.parametrize("marked", [False, True])  # the CLI's question (no marker) and the app's (marked)
def test_a_step_reads_the_requests_picture_as_the_engine_does(tiny_vision, marked):
    target, projector = tiny_vision
    eng = Engine(target, mmproj=projector, n_ctx=512, n_threads=1, metrics_log=False, calibration=False)
    try:
        question = (MEDIA_MARKER + "\n" if marked else "") + "the value of"
        loop = ToolLoop(eng, SimpleNamespace(tools=[]), Allowance.parse(None))
        request = GenerationRequest([{"role": "user", "content": question}], chat=True, images=(PICTURE,),
                                    max_tokens=12)
        [done] = [ev for ev in loop.run(request) if isinstance(ev, LoopDone)]
        alone = eng.generate([{"role": "system", "content": AGENT_SYSTEM}, {"role": "user", "content": "the value of"}],
                             chat=True, images=[PICTURE], max_tokens=12)
        assert done.result.text == alone.text
    finally:
        eng.close()
