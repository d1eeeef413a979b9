"""The Models page in parts: the pairs table with downloads (pairs), the Library's embedding
models apart from the pairs (embedding), local GGUF imports (imports), the compatibility check
of any two files (compat), and the page assembling them."""

from .page import ModelsView

__all__ = ["ModelsView"]
