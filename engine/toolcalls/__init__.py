"""Tool calls as small models write them: read, forced by a grammar, checked.

Calls read out of an answer or a stream, per model family (tool_calls.py), a grammar-forced
call read as it is written so its arguments stream piece by piece (forced_calls.py), an `auto`
call the lazy grammar holds (auto_calls.py), the GBNF that forces a call (tool_grammar.py), the
check of a call's arguments against the function's schema (tool_args.py), and one answer's
reading under a tool choice, the grammar it needs included (reading.py). Two rooms use them:
the OpenAI server (engine.serving.server turns them into one GenerationRequest) and the tool
loop that runs MCP tools (engine.tooluse); decoding never sees a tool call. (How tools are
offered to the model through its chat template is prompting's:
engine.decoding.prompting.tool_prompt.)

May import: engine.decoding, engine.llamacpp, engine.models, the top-level helpers, and its own
modules. Never engine.tooluse, engine.serving, engine.measure, engine.cli or app.
"""
