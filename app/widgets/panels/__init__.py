"""Feature panels, each one part of a page or of the status bar: the model bar, a race pane,
the RPC workers list and dialog, the local-server switch, the first-run welcome banner and the
pane a Library source opens in (with a PDF source's page, rendered on a worker thread).

The highest widget family: may import the other families (controls/, charts/, attachments/,
transcript/), history, downloads, app's core modules and engine/; never views or main_window.
"""
