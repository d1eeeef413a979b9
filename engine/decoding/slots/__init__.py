"""Parallel slots: up to N generations at once over one target, one llama.cpp decode per step.

- scheduler.py: `SlotScheduler`, which admits requests into free slots (the rest wait), reads
  new prompts in chunks inside the running slots' batches (a prompt's pictures each in a decode
  of its own for its slot), and runs every slot's step as the
  single-sequence decoder's own halves (`Decoder.plan_step`, `judge`, `settle`) around one
  shared `llama_decode` (engine/llamacpp/sequences.py's `SharedContext`); a long prompt where
  the target's plain twin reads faster is read there a chunk per step instead
  (engine/llamacpp/plain_reader.py), its state handed to the slot's sequence;
- slot_drafters.py: each slot's drafters made before its decoders (a model draft onto one
  `DraftBatch`, an MTP head onto one `HeadBatch`) and closed;
- turn.py: a generation's turn in the slots through the engine's queue (`stream_in_slot`), as
  the server's requests and the app's chat take it, and which slot draft a draft choice is.
- planning.py: `plan_slots`, a step's first half: every slot's plan, the draft model's decodes
  of all the slots drafting with it made together (drafting/batched_drafter.py's `DraftBatch`),
  Auto in each slot planning under the rest of the pass.

It sits above decoding's top (it runs the top's decoder, events and requests) and below the
server that schedules its answers through it.

May import: engine.decoding (its top and wings), engine.llamacpp, engine.models, engine.errors,
engine.paths, engine.units, engine.resources. Never engine.serving, engine.measure or above.
"""
