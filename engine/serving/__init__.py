"""Serving: Tandem for other programs and other processes.

The OpenAI-compatible HTTP server (server/) and the child-process engine that runs a target
split over RPC workers (remote_engine.py, same calls as `Engine`).

May import: engine.decoding, engine.models and the top-level helpers. Never engine.measure,
engine.cli or app.
"""
