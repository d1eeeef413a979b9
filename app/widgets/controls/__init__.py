"""Reusable controls that know nothing of chats or races: elided labels and combos, a flow
layout, live labels, the load bar, the lookahead control, reflowing layouts and page
scrolling, toasts, the token meter, table models, Esc handling, steady placeholders.

The lowest widget family: may import app's core modules (theme, workers) and engine/; never
another widget family, history, views or main_window. A new general-purpose control goes here.
"""
