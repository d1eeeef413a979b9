"""Drafting: what proposes tokens for the target to verify, and how many.

The drafters (drafters.py: the Drafter protocol, a model draft, prompt lookup; draft_context.py:
what one step tells `propose`), a draft of another vocabulary bridged through text
(bridge_drafter.py), the draft choice parsed once (choice.py: none, lookup, a file, a Model, a
Drafter), the lookahead policies (lookahead.py: Fixed, Auto, the live handle a slider moves) and
Auto's measured cost model (cost_model.py).

May import: the sampling wing, engine.llamacpp, engine.models, the top-level helpers
(engine.errors, paths, units, resources), and its own modules. Never the prompting wing,
decoding's top (decoder, engine, settings, ...) or anything above decoding.
"""
