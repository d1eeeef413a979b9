"""Auto's measured costs kept per machine and model (the calibration store, engine/models/
calibration.py): what seeds a new cost model, and what a finished generation leaves for the next.

A stored cost is a hint, not a law: one taken on a machine that another program starved stands
until Auto measures that size again, and a cost that says drafting can never pay stops Auto
from ever measuring it. Found in a store here: one-token passes at 83 ms beside 2-, 3- and
4-token passes at 8.3 s, and a 0.5B draft's token at 15.3 s, each width kept by the merge with
the old entry after the run that measured it so had gone. So a width or draft time above what a
pass over its tokens one at a time would cost (`CostModel.stalled`) is neither seeded nor kept.
"""

from __future__ import annotations

from ...llamacpp.llama import Model, supports_gpu_offload
from ...llamacpp.rpc_backend import Cluster
from ...models import calibration
from .cost_model import CostModel
from .drafters import Drafter

__all__ = ["CostStore", "plausible_curve"]


class CostStore:
    """The store's entries for one loaded target (`threads`, and the RPC workers it is split over)."""

    def __init__(self, target: Model, threads: int, rpc: Cluster | None = None):
        self.target, self.threads, self.rpc = target, threads, rpc

    def keys(self, drafter: Drafter | None) -> tuple[str, str | None]:
        """The target's verify curve's key, and the draft model's draft time's (None: no draft model)."""
        backend = f"{'gpu' if supports_gpu_offload() else 'cpu'}:ngl{self.target.n_gpu_layers}"
        # A target split over RPC workers passes at another cost than the same file loaded
        # here, so it has its own key, named by its workers; the draft stays local either way.
        target_backend = backend + (f"{calibration.RPC_MARK}{','.join(self.rpc.endpoints)}" if self.rpc else "")
        vk = calibration.key(calibration.file_id(self.target.path), threads=self.threads, backend=target_backend)
        dk = None
        if drafter is not None and drafter.model is not None:
            # a bridged draft's step also re-tokenises text: its cost is filed apart
            via = ":bridge" if drafter.kind == "bridge" else ""
            dk = calibration.key(calibration.file_id(drafter.model.path), threads=self.threads, backend=backend + via)
        return vk, dk

    def confidence_key(self, drafter: Drafter) -> str:
        """What a drafter's confidences are worth depends on the target and the drafter, not
        on the machine: one entry per (target file, draft file or drafter kind)."""
        other = calibration.file_id(drafter.model.path) if drafter.model is not None else drafter.calibration_name
        return f"confidence|{calibration.file_id(self.target.path)}|{other}"

    def seed(self, cost: CostModel, drafter: Drafter | None) -> None:
        """Seed `cost` with what this machine measured for the target and `drafter` before."""
        vk, dk = self.keys(drafter)
        curve = plausible_curve((calibration.load(vk) or {}).get("verify_s") or {})
        seed: dict = {"verify_s": curve}
        if dk is not None:
            seed["draft_token_s"] = _plausible_draft((calibration.load(dk) or {}).get("draft_token_s"), curve)
        cost.import_costs(seed)
        if drafter is not None:
            conf = calibration.load(self.confidence_key(drafter))
            if isinstance(conf, dict):
                cost.import_confidence(conf)

    def save(self, cost: CostModel, drafter: Drafter | None) -> None:
        """Keep what `cost` measured several times for the next process: its verify curve over
        the stored one (whose widths stay where the new one-token pass makes them plausible),
        the draft time, and the drafter's confidences' worth."""
        vk, dk = self.keys(drafter)
        # widths measured several times only: not a sample or two (a stall, a probe), nor the prior
        now = cost.export_costs(min_samples=CostModel.CALIBRATED_SAMPLES)
        entries: dict = {}
        curve = now["verify_s"]
        if curve:
            old = (calibration.load(vk) or {}).get("verify_s") or {}
            entries[vk] = {"verify_s": plausible_curve({**old, **curve}, curve.get("1"))}
        draft = _plausible_draft(now["draft_token_s"], curve or (calibration.load(vk) or {}).get("verify_s") or {})
        if dk is not None and draft:
            entries[dk] = {"draft_token_s": draft}
        if drafter is not None:
            conf = cost.export_confidence()
            if any(conf["total"]):
                entries[self.confidence_key(drafter)] = conf
        if entries:
            calibration.save(entries)


def plausible_curve(curve: dict, one: float | None = None) -> dict:
    """The widths of a stored verify curve (seconds by token count, as text) that cost at most
    what their tokens cost one at a time (`CostModel.stalled`), against the one-token pass `one`
    (default: the curve's own); a curve without a one-token pass stays as it is (nothing to check
    it by: `CostModel.import_costs` checks each width it takes)."""
    try:
        v1 = float(one if one is not None else curve.get("1"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return dict(curve)
    out = {}
    for n, t in curve.items():
        try:
            if float(t) > 0 and not CostModel.stalled(max(1, int(n)), float(t), v1):
                out[n] = t
        except (TypeError, ValueError):
            continue
    return out


def _plausible_draft(per_token: object, curve: dict) -> float | None:
    """A draft token's stored time, unless it costs more than the target's one-token passes it
    would stand in for (`CostModel.stalled`): such a draft could never pay, so a value
    that says so is a stall, and Auto had better measure it again."""
    try:
        d = float(per_token)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    try:
        v1 = float(curve["1"])
    except (KeyError, TypeError, ValueError):
        return d if d > 0 else None
    return d if d > 0 and not CostModel.stalled(1, d, v1) else None
