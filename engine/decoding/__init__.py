"""Decoding: the product's heart, from a request to a stream of events.

The llama.cpp seam (llama.py, rpc_backend.py), the Decoder loop (decoder.py), drafters,
lookahead policies with Auto's cost model, exact sampling and verification (its passes over a
logits row in C: _row_kernels.c, compiled by setup.py), events, the one
request type (settings.GenerationRequest / RuntimeParams), chat templates in a sandbox, the
generation queue that runs one generation at a time per engine, tool calls (offered through
the template, read out of answers, forced by a grammar and then streamed as written), and
`Engine` (engine.py), which ties a loaded target to all of it.

May import: engine.models, engine.errors, engine.paths, engine.units, engine.resources, and
its own modules. Never engine.measure, engine.serving, engine.cli or app.
"""
