"""The Models page in parts: the pairs table with downloads (pairs), local GGUF imports
(imports), the compatibility check of any two files (compat), and the page assembling them."""

from .page import ModelsView

__all__ = ["ModelsView"]
