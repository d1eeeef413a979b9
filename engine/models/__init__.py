"""Models: everything known about model files before one is run.

The catalog (models.toml), the store in the Hugging Face cache layout, downloads (Hub and
PyPI mirror) with resume and sha256 checks, GGUF header reads (local and over HTTP ranges),
pair compatibility, a target's vision projector found and checked (`projector.py`),
hardware fit and context windows, draft variants, the persisted calibration of measured pass
costs, and the tiny GGUF writers used by tests and self-tests (a tiny BERT encoder among them,
`tiny_bert.py`, for the Library's embeddings). The catalog's models are chat models in pairs,
or an embedding model (`kind = "embedding"`) in none.

May import: engine.errors, engine.paths, engine.units, engine.resources, and its own modules.
Never llama.cpp's seam (engine.llamacpp), the decode path (engine.decoding) or anything above
it.
"""
