"""The first race a newcomer sees, chosen by the machine it runs on.

Writing a function from scratch with the model draft is the textbook demo, and on a GPU it
shows a clear win. On a CPU the 0.5B draft costs about as much as it saves, Auto rightly
drafts nothing, and the first sight of speculative decoding was "About the same: nothing
was drafted". An edit (rename an attribute in a class, reply with the whole code) with
prompt lookup is what a CPU speeds up: most of the answer is copied from the prompt, and the
proposals cost nothing. Both are real tasks from the code-editing and generation suites,
raced honestly; only the choice of which to show first depends on the hardware.
"""

from __future__ import annotations

from dataclasses import dataclass

from .suites import load_suite

EDIT_SUITE, EDIT_ID = "code_editing", "rename_balance"
GENERATE_PROMPT = "Write a Python function that returns the n-th Fibonacci number, with a docstring."


@dataclass(frozen=True)
class Demo:
    prompt: str
    draft: str  # "lookup" (no second model) or "model" (the pair's draft)
    why: str  # one line for the terminal and the app


def first_demo(has_gpu: bool) -> Demo:
    """The edit with prompt lookup on a CPU, a function from scratch with the draft model on a GPU."""
    if has_gpu:
        return Demo(GENERATE_PROMPT, "model",
                    "a GPU verifies a few tokens for the price of one: the draft model pays on new text")
    prompt = next(p.prompt for p in load_suite(EDIT_SUITE).prompts if p.id == EDIT_ID)
    return Demo(prompt, "lookup",
                "on a CPU, an edit copies most of its answer from the prompt: prompt lookup drafts it for free")
