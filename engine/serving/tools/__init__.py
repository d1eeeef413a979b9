"""Tool calls on the server: what the OpenAI API's `tools` become around one generation.

Calls read out of an answer or a stream, per model family (tool_calls.py), a grammar-forced
call read as it is written so its arguments stream piece by piece (forced_calls.py), and the
GBNF that forces a call (tool_grammar.py); and the check of a call's arguments against the
function's schema (tool_args.py). The server turns them into one GenerationRequest;
decoding never sees a tool call. (How tools are offered to the model through its chat template
is prompting's: engine.decoding.prompting.tool_prompt.)

May import: engine.decoding, engine.llamacpp, engine.models, the top-level helpers, and its own
modules. Never engine.serving.server, engine.measure, engine.cli or app.
"""
