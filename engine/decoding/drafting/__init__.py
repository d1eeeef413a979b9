"""Drafting: what proposes tokens for the target to verify, and how many.

The one interface the decoder drafts through (drafter_api.py: Drafter, Proposal; draft_context.py:
what one step tells `propose`), the drafters (drafters.py: a model draft; lookup_drafter.py:
prompt lookup; bridge_drafter.py: another vocabulary bridged through text; mtp_drafter.py;
suffix_drafter.py; mixed_drafter.py: a model draft with the free drafters beside it, choosing
among them per step; batched_drafter.py: a draft model's work for the parallel slots, one draft
context with a sequence per slot, their decodes batched),
the draft choice parsed once (choice.py: none, lookup, a file, a Model, a Drafter) and the
drafter it names (factory.py), the lookahead policies (lookahead.py: Fixed, Auto, the live
handle a slider moves), the sources Auto set aside for not being accepted (set_aside.py) and
Auto's measured cost model (cost_model.py), kept per machine and model (cost_store.py).

May import: the sampling wing, engine.llamacpp, engine.models, the top-level helpers
(engine.errors, paths, units, resources), and its own modules. Never the prompting wing,
decoding's top (decoder, engine, request, ...) or anything above decoding.
"""
