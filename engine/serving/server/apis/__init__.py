"""One module per API the server speaks, each a peer over the answer core (`..answer`).

`openai` (chat and text completions, with `openai_wire` for their bodies and chunks),
`responses` (OpenAI's Responses), `anthropic` (Messages), `ollama` (with `ollama_models`
for its model listing), `infill` (llama-server's /infill, with `infill_schema` and
`editor_limits`), `embeddings`, `listing` (/v1/models, /health, /metrics) and
`llama_extras` (/tokenize, /detokenize, /props), `library` (`--library DIR`: a chat
request's `"library": true`, answered from a folder with its sources; /v1/library). `translate` holds what the APIs
translated onto the chat request share: the body reader and validation, and their pictures
as the chat request's `image_url` parts.

Each reads its own body, turns it into the core's request, and writes the core's neutral
events in its own wire form and errors. A new API is a new module here, with its router
added in `..app`. May import the server's top modules (answer, wire, schemas, errors,
config, doors, ...), engine.toolcalls, engine.decoding, engine.library and the top-level helpers;
nothing in the server's top modules imports from here.
"""
