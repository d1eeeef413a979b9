"""Serving: Tandem for other programs and other processes.

The OpenAI-compatible HTTP server (server/), the tool calls it reads out of answers and forces
by a grammar (tools/), and the child-process engine that runs a target split over RPC workers
(remote_engine.py, same calls as `Engine`).

May import: engine.decoding, engine.llamacpp, engine.models and the top-level helpers;
server/ may import tools/, never the other way. Never engine.measure,
engine.cli or app.
"""
