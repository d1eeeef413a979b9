"""Prompting: from messages or text to the prompt's tokens.

Chat templates rendered in a bounded sandbox (chat.py, template_sandbox.py), tools offered to
the model through its template or a fallback system prompt (tool_prompt.py), prompts fitted to
the context (prompt_fit.py), prompt text read from files and pipes (prompt_text.py),
message text kept out of the model's control tokens (content_guard.py), and fill-in-the-middle
prompts laid out as llama-server lays them (fim_layout.py: the server's /infill and the
benchmark's FIM suites), and a request's pictures placed in its prompt (media.py: the media
markers, the picture tokens the target's projector puts in their slots).

May import: engine.llamacpp, engine.models, engine.documents (checked pictures), the top-level helpers (engine.errors, paths, units,
resources), and its own modules. Never the sampling or drafting wing, decoding's top (decoder,
engine, request, ...) or anything above decoding.
"""
