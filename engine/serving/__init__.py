"""Serving: Tandem for other programs and other processes.

The OpenAI-compatible HTTP server (server/; the tool calls it reads out of answers and forces
by a grammar live in engine.toolcalls, which the tool loop shares), and the child-process
engine that runs a target split over RPC workers (remote_engine.py, same calls as `Engine`).

May import: engine.toolcalls, engine.decoding, engine.llamacpp, engine.models and the top-level
helpers. Never engine.tooluse, engine.measure, engine.cli or app.
"""
