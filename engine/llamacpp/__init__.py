"""llama.cpp: the one room that talks to llama-cpp-python (`llama_cpp`) and its libraries.

- llama.py: the model and its decode context (Model, Context), llama.cpp's log routing;
- sequences.py: several sequences in one context (SharedContext), decoded in one batch, each
  rolled back or freed alone: the parallel slots' seam (hybrid targets and MTP heads too);
- recurrent.py: the one way a hybrid's sequence is rolled back (Rollback: snapshots, checkpoint,
  re-read), for Context and each SharedContext sequence;
- plain_reader.py: long prompts read through an unrepacked twin of the target (PlainReader) where
  that is measured faster, the KV state handed to the target's context;
- fim.py: the fill-in-the-middle tokens a vocabulary reports;
- embedding.py: the embedding context (a generation model mean-pooled, an encoder pooled as it declares);
- text_embedder.py: an embedding GGUF loaded for the Library's passages and questions (TextEmbedder),
  and which one the Library uses (library_embedder);
- vision.py: a target's vision projector (mmproj) through libmtmd: pictures encoded once by
  content hash, read into the target's Context as ImageSpans;
- grammar_sampler.py: llama.cpp's grammar sampler and its parser's reason, for the sampling wing;
- ggml_devices.py: ggml's device registry and RPC backend, bound with ctypes;
- rpc_backend.py: RPC endpoints and the split plan by free memory;
- quantize.py: the quantiser;
- build.py: whether Tandem's set-up built the installed llama_cpp (for `tandem doctor`), and
  which build it is (a saved KV state is loaded only by the build that made it);
- runtime.py: RuntimeParams, what everything that loads a model takes;
- schema_grammar.py (with int_range.py and gbnf_check.py): llama-cpp-python's JSON-schema
  converter with every keyword enforced or refused.

Everything above talks to these, never to llama_cpp: tests/test_architecture.py fails on an
import of llama_cpp anywhere else in engine/ or app/.

May import: engine.models, engine.documents (the checked pictures), engine.errors, engine.paths, engine.units, engine.resources, and
its own modules. Never engine.decoding or anything above it.
"""
