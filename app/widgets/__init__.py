"""Reusable widgets, in families that import only downward:

  controls/     general controls (elided labels, flow layout, live label, lookahead control,
                reflow, toast, token meter, ...): no other family
  charts/       live charts, speed bars, stats lines: controls
  attachments/  files going with a prompt (chips, reading, section picker): controls
  transcript/   the conversation rendered (Markdown, code, provenance, file cards, export):
                controls, attachments
  panels/       feature panels (model bar, race pane, RPC workers, server switch, welcome
                banner): any family above

May import app's core modules (theme, workers, history, downloads) and engine/; never views/,
main_window or main. A new control a chat page needs goes in controls/ when it is general, in
the family it belongs to otherwise; the page's own behaviour goes in app/views/chat/.
"""
