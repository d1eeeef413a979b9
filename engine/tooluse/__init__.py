"""Tool use: MCP servers the user configured, and the loop that lets a model call their tools.

`config.py` reads `mcp.json` (LM Studio's and Cursor's notation: stdio commands and Streamable
HTTP URLs, checked, one line per mistake); `hub.py` runs the servers with the official MCP SDK
(1.x) on a loop thread of its own (tools listed, calls under a time limit, children stopped on
close); `results.py` turns definitions and results into text the model reads, within token
budgets; `toolset.py` names the offered tools and says which may run (none by default);
`loop.py` is the tool loop over an engine (generate, read calls, run the allowed ones, append
the results, again). The CLI (`tandem generate --mcp`, `tandem tools`) and the app use it.

May import: engine.toolcalls (reading calls), engine.decoding, engine.llamacpp, engine.models,
the top-level helpers, the `mcp` SDK, and its own modules. Never engine.serving, engine.measure,
engine.cli or app.
"""
