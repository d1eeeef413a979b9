"""The `tandem` command: one module per group of sub-commands, shared helpers in common.py.

main.py parses and dispatches; models.py (models, pull, check, import), ask.py, serve.py, rpc.py
(worker), optimize.py and doctor.py each register their sub-commands and import helpers from
common.py only, never from main.py. `tandem app` reaches the GUI through the `tandem.gui`
entry point that app/ registers, so the engine never imports app.

May import: every room of engine/. Nothing in engine/ imports engine.cli.
"""
