"""The guard against logits that are not numbers (a GGUF with NaN weights, a corrupt row,
an overflow): sampling on them fails obscurely and greedy picks garbage.

Cheap by construction: every path already finds a row's largest logit (numpy's argmax
lands on the first NaN and on +inf), so one scalar test per row decides. -inf is no
error: a ban (logit bias, a grammar's mask) writes it on purpose.
"""

from __future__ import annotations

import math

from ...errors import NonFiniteLogits


def check_top(value: float) -> None:
    """Raise NonFiniteLogits when a row's largest logit is NaN or +inf."""
    if not value < math.inf:  # False for NaN and +inf alone
        raise NonFiniteLogits.found("NaN" if value != value else "infinite")


def model_label(model: object, role: str = "") -> str:
    """How an error names a model: its name and file (never the folder it sits in)."""
    name = str(getattr(model, "name", "") or "")
    path = getattr(model, "path", None)
    file = getattr(path, "name", "") if path is not None else ""
    label = f"{name} ({file})" if name and file and name != getattr(path, "stem", None) else (file or name or "the model")
    return f"{role} {label}".strip()
