"""Decoding: the product's heart, from a request to a stream of events.

At its top: `Engine` (engine.py), which ties a loaded target to all of it, and the protocol it
shares with the child-process engine (engine_api.py: BaseEngine), the Decoder loop (decoder.py),
the one request type (request.py: GenerationRequest), events (events.py), the generation queue
that runs one generation at a time per engine (queue.py), the prompt cache that keeps read
prompts' states across requests, draft choices and restarts (prompt_cache.py, its files in
prompt_cache_files.py), the cancel token, text assembly, the
quality check and the metrics log. Three wings hold what the loop uses: sampling/ (the sampler,
exact verification, logit controls, grammars), drafting/ (drafters, lookahead policies, Auto's
cost model) and prompting/ (chat templates in a sandbox, tools offered through the template,
prompt fitting). Each wing's __init__ says what it holds and may import. Above the top, slots/
runs the top's decoder on several sequences of one context at once (the parallel slots).

May import: engine.llamacpp (the llama.cpp seam), engine.models, engine.documents, engine.errors, engine.paths,
engine.units, engine.resources, and its own modules. A wing never imports decoding's top;
drafting may import sampling; prompting stands alone. Never engine.measure, engine.serving,
engine.cli or app.
"""
