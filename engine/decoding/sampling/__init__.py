"""Sampling: from the target's logits row to a token, exactly.

The sampler and the acceptance rule of speculative sampling (sampler.py: Sampler, verify),
sampling parameters and the reference filters (distribution.py), the lazy exact distribution
of a large row (lazy_dist.py) with its passes over the row in C (_row_kernels.c, compiled by
setup.py; kernels.py: whether they import and the command that builds them), the guard
against logits that are not numbers (finite.py), logit bias, penalties and logprobs
(logit_controls.py), grammar-constrained sampling and verification (grammar.py), and the run's
verifier that owns them for the decoder (verifier.py).

May import: engine.llamacpp, engine.models, the top-level helpers (engine.errors, paths, units,
resources), and its own modules. Never the drafting or prompting wing, decoding's top (decoder,
engine, settings, ...) or anything above decoding.
"""
