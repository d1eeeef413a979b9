"""Sampling: from the target's logits row to a token, exactly.

The sampler and the acceptance rule of speculative sampling (sampler.py: Sampler, verify),
sampling parameters (params.py), the distribution of a row under them in one module
(distribution.py: the reference filters, the lazy exact form of a large row, draws and the
residual) with its passes over the row in C (_row_kernels.c, compiled by setup.py;
kernels.py: whether they import and the command that builds them), the guard
against logits that are not numbers (finite.py), logit bias, penalties and logprobs
(logit_controls.py), grammar-constrained sampling and verification (grammar.py), and the run's
verifier that owns them for the decoder (verifier.py).

May import: engine.llamacpp, engine.models, the top-level helpers (engine.errors, paths, units,
resources), and its own modules. Never the drafting or prompting wing, decoding's top (decoder,
engine, request, ...) or anything above decoding.
"""
