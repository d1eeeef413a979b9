"""Reusable widgets: transcript with provenance colours, charts, lookahead control, meters,
model bar, race panes, RPC and server controls. May import app's core modules (theme,
workers, history) and engine/; never views/, main_window or main."""
