"""The model bar at the top of the chat: which target (a downloaded catalog pair or an
imported GGUF), which drafter, how long a context, what that costs in memory, and Load.

One control per thing: the Draft box here is the chat's only drafter choice. "Prompt
lookup" and "No draft" are offered for every target (lookup needs no second model); the
pair's draft model is offered where there is one. Loading goes through `Session.load`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QWidget

from engine.models.catalog import ModelSpec

from ..controls.elided_combo import ElidedCombo

CONTEXT_PRESETS = (2048, 4096, 8192, 16384, 32768, 65536, 131072)
DRAFTS = [("Draft model", "model"), ("MTP head", "mtp"), ("Prompt lookup", "lookup"), ("Suffix (past answers)", "suffix"),
          ("No draft", "none")]


@dataclass
class ModelChoice:
    """One loadable entry: a target, the pair's draft model if any, and what sizes them."""

    label: str
    target: Path
    draft: Path | None
    pair_id: str | None
    specs: tuple[ModelSpec, ...]  # target first, then the draft (memory estimate)
    trained: int | None  # the target's trained context length
    mtp: bool = False  # the target carries MTP layers: it can draft for itself
    mtp_pair: bool = False  # a catalog pair that drafts with them (chosen by default)


_specs: dict[tuple[str, int, float], ModelSpec] = {}


def _spec(path: Path) -> ModelSpec:
    """A GGUF's header-derived spec, read once per file version (headers of large vocabularies
    take a while to parse, and the bar lists models each time the chat is shown)."""
    from engine.models.context_window import spec_from_header

    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime)
    if key not in _specs:
        _specs[key] = spec_from_header(path)
    return _specs[key]


def _from_files(label: str, target: Path, draft: Path | None, pair_id: str | None = None) -> ModelChoice | None:
    from engine.errors import TandemError

    try:
        specs = [_spec(target)]
        if draft is not None and draft != target:
            specs.append(_spec(draft))
    except (OSError, TandemError):
        return None
    return ModelChoice(label, target, draft, pair_id, tuple(specs), specs[0].context_length or None,
                       mtp=specs[0].mtp_layers > 0)


def available_models(catalog: Any = None) -> list[ModelChoice]:
    """Downloaded catalog pairs, then imported GGUFs that still exist on disk."""
    from engine.llamacpp.ggml_devices import current_backend
    from engine.models import catalog as catalog_mod, draft_variants, store

    out: list[ModelChoice] = []
    try:
        cat = catalog or catalog_mod.load()
        pairs = list(cat.pairs.values())
    except Exception:  # a broken catalog must not break the chat; Models says what is wrong with it
        pairs = []
    for p in pairs:
        t, d = store.locate_model(p.target), store.locate_model(p.draft)
        if t is None or d is None:
            continue
        d = draft_variants.preferred(d, current_backend)
        specs = (p.target,) if p.draft.id == p.target.id else (p.target, p.draft)
        mtp_pair = p.drafter == "mtp"
        out.append(ModelChoice(p.title, t, None if mtp_pair else d, p.id, specs, p.target.context_length or None,
                               mtp=p.target.mtp_layers > 0, mtp_pair=mtp_pair))
    for m in store.imported_models():
        if m.exists:
            choice = _from_files(f"{m.name} (imported)", Path(m.path), None)
            if choice is not None:
                out.append(choice)
    return out


def draft_model_path(draft: Any) -> Path | None:
    """The draft model of a loaded pair (a path, given as str or Path), or None for lookup/none."""
    from engine.decoding.drafting.choice import DraftChoice

    return DraftChoice.parse(draft).path


def context_choices(trained: int | None) -> list[int]:
    """Presets up to the trained length, and the trained length itself."""
    if not trained:
        return list(CONTEXT_PRESETS[:4])
    out = [n for n in CONTEXT_PRESETS if n < trained]
    return out + [trained]


class ModelBar(QWidget):
    """Model · Draft · Context (memory it needs) · Load."""

    draftChanged = Signal(str)  # "model" | "mtp" | "lookup" | "none"

    def __init__(self, session: Any, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.choices: list[ModelChoice] = []
        self._model_draft_wanted = False  # "Draft model" was switched off only because none was listed
        self._switching = False
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.model = ElidedCombo()  # a long name or draft is shortened with "…", whole in the tooltip
        self.model.setToolTip("Target model: downloaded catalog pairs and imported GGUF files")
        self.model.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.model.setMinimumContentsLength(6)  # elided in a narrow window; the full name is in the tooltip
        self.model.currentIndexChanged.connect(self._model_picked)
        self.draft = ElidedCombo()
        for label, key in DRAFTS:
            self.draft.addItem(label, key)
        self.draft.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.draft.setMinimumContentsLength(6)
        self.draft.setToolTip("How answers are drafted: a small draft model, the target's own MTP head "
                              "(models that ship one, like Qwen3.5), copying from the prompt "
                              "(Prompt lookup, no second model), or the target alone.\n"
                              "Applies to the next answer; switching to a draft model needs Load.")
        self.draft.currentIndexChanged.connect(self._draft_picked)
        self.context = QComboBox()
        self.context.setToolTip("Context length: how many tokens of system prompt, chat history, "
                                "attachments and answer the model holds. Applies on Load.")
        self.context.currentIndexChanged.connect(self._update_need)
        self.context.currentIndexChanged.connect(self._sync)
        self.need = QLabel("")
        self.need.setObjectName("contextMemory")
        self.vision = QLabel("")  # "sees images" while the loaded model has its projector
        self.vision.setObjectName("visionMark")
        self.vision.hide()
        self.load_btn = QPushButton("Load")
        self.load_btn.setToolTip("Load the chosen model with this draft and context")
        self.load_btn.clicked.connect(self.load)
        # no caption labels: each box names its own choice ("Draft: …", "8,192 tokens"), so the bar
        # fits a narrow window; the tooltips explain
        lay.addWidget(self.model, 3)
        lay.addWidget(self.draft, 2)
        lay.addWidget(self.context)
        self.context.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        lay.addWidget(self.need)
        lay.addWidget(self.vision)
        lay.addWidget(self.load_btn)
        session.pairChanged.connect(self.refresh)
        session.busyChanged.connect(self._sync)
        session.downloads.finished.connect(self.relist)  # a pair just downloaded can be picked
        self.refresh()

    def showEvent(self, event: Any) -> None:
        """Models may have been imported meanwhile: list again when the chat comes into view."""
        super().showEvent(event)
        if not self.session.busy:
            self.relist()

    # -- the list ------------------------------------------------------------------------
    def refresh(self, *_: object) -> None:
        """List what can be loaded now, the loaded model selected (added if it is not listed)."""
        self._relist(keep_selection=False)

    def relist(self, *_: object) -> None:
        """List again, keeping the user's pick (a download finished, the chat came into view)."""
        self._relist(keep_selection=True)

    def _relist(self, keep_selection: bool) -> None:
        before = self.current() if keep_selection else None
        draft_key = self.draft.currentData()
        self.choices = available_models(getattr(self.window(), "catalog", None))
        pair = self.session.pair
        loaded = self._loaded_index()
        if pair is not None and loaded is None:
            draft = draft_model_path(pair.draft)
            choice = _from_files(pair.label, Path(pair.target), draft, pair.pair_id)
            if choice is not None:
                self.choices.insert(0, choice)
        self.model.blockSignals(True)
        self.model.clear()
        for c in self.choices:
            self.model.addItem(c.label)
            self.model.setItemData(self.model.count() - 1, f"{c.target}" + (f"\ndraft: {c.draft}" if c.draft else ""),
                                   Qt.ItemDataRole.ToolTipRole)
        if not self.choices:
            self.model.addItem("No model downloaded: see Models")
        idx = self._loaded_index()
        if before is not None:
            idx = next((i for i, c in enumerate(self.choices)
                        if c.target == before.target and c.pair_id == before.pair_id), idx)
        self.model.setCurrentIndex(idx if idx is not None else 0)
        self.model.blockSignals(False)
        self._model_picked()
        if keep_selection and draft_key is not None:
            i = self.draft.findData(draft_key)
            if i >= 0 and self.draft.model().item(i).isEnabled():
                self.draft.setCurrentIndex(i)

    def _loaded_index(self) -> int | None:
        pair = self.session.pair
        if pair is None:
            return None
        for i, c in enumerate(self.choices):
            if Path(c.target) == Path(pair.target) and (c.pair_id == pair.pair_id or c.pair_id is None):
                return i
        return None

    def current(self) -> ModelChoice | None:
        i = self.model.currentIndex()
        return self.choices[i] if 0 <= i < len(self.choices) else None

    # -- choices -------------------------------------------------------------------------
    def _model_picked(self, *_: object) -> None:
        c = self.current()
        self.context.blockSignals(True)
        self.context.clear()
        eng = self.session.engine
        loaded = self._loaded_index()
        want = eng.n_ctx if eng is not None and loaded is not None and loaded == self.model.currentIndex() \
            else self.session.default_n_ctx()
        trained = c.trained if c else None
        want = min(want, trained) if trained else want
        for n in sorted(set(context_choices(trained)) | {want}):  # the loaded or default length, even if no preset
            self.context.addItem(f"{n:,} tokens", n)
        self.context.setCurrentIndex(self.context.findData(want))
        self.context.blockSignals(False)
        self._sync_draft_items()
        self._update_need()
        self._sync()

    def _sync_draft_items(self) -> None:
        """'Draft model' names the pair's draft and is off where there is none; 'MTP head' is
        on where the target carries MTP layers. A choice the model cannot take moves to one it can."""
        c = self.current()
        has = c is not None and c.draft is not None
        mtp = c is not None and c.mtp
        box = self.draft.model()
        item = box.item(self.draft.findData("model"))
        item.setEnabled(has)
        item.setText(f"Draft: {c.draft.stem}" if has and c is not None and c.draft is not None else "Draft model")
        box.item(self.draft.findData("mtp")).setEnabled(mtp)
        key = self.draft.currentData()
        fallback = "mtp" if mtp else "lookup"
        if c is not None and c.mtp_pair and self._model_draft_wanted is False and key == "model":
            self._set_draft_for_user(self.draft.findData("mtp"))  # the pair drafts with its head
        elif (key == "model" and not has) or (key == "mtp" and not mtp):
            self._set_draft_for_user(self.draft.findData(fallback if key == "model" else ("model" if has else "lookup")))
            self._model_draft_wanted = key == "model"  # not the user's choice: back to the draft when there is one
        elif has and self._model_draft_wanted and key in ("lookup", "mtp"):
            self._set_draft_for_user(self.draft.findData("model"))

    def _set_draft_for_user(self, index: int) -> None:
        """Change the Draft box because the listed models changed, not because the user chose."""
        self._switching = True
        try:
            self.draft.setCurrentIndex(index)
        finally:
            self._switching = False

    def _draft_picked(self, *_: object) -> None:
        if not self._switching:
            self._model_draft_wanted = False  # the user chose: keep their choice
        self._update_need()
        self.draftChanged.emit(str(self.draft.currentData()))

    def n_ctx(self) -> int:
        v = self.context.currentData()
        return int(v) if v else 4096

    def memory_specs(self) -> Sequence[ModelSpec]:
        c = self.current()
        if c is None:
            return ()
        return c.specs if self.draft.currentData() == "model" else c.specs[:1]

    def _update_need(self, *_: object) -> None:
        from engine.models.context_window import memory_need
        from engine.models.hardware import model_need
        from engine.units import human_bytes

        specs = self.memory_specs()
        if not specs:
            self.need.setText("")
            return
        n = self.n_ctx()
        self.need.setText(f"{human_bytes(memory_need(specs, n))}")  # "needs" is in the tooltip: a narrow bar
        rows = []
        for m in specs:
            w, kv, ov = model_need(m, n)
            rows.append(f"{m.title}: weights {human_bytes(w)} + KV cache {human_bytes(kv)} + overhead {human_bytes(ov)}")
        self.need.setToolTip(f"Needs {human_bytes(memory_need(specs, n))} of memory at {n:,} tokens of context "
                             "(as Models' fit check counts it):\n" + "\n".join(rows))

    def is_loaded(self) -> bool:
        """The chosen model at the chosen context is what is loaded (the Draft box needs no
        reload: each answer uses its choice)."""
        eng, loaded = self.session.engine, self._loaded_index()
        return eng is not None and loaded is not None and loaded == self.model.currentIndex() \
            and self.n_ctx() == eng.n_ctx

    def _show_vision(self) -> None:
        """Whether the loaded model sees pictures: a mark when its projector was loaded, the
        reason when one beside it was refused, nothing for a model that never had one."""
        s = self.session
        sees, note = bool(getattr(s, "sees_images", False)), str(getattr(s, "projector_note", ""))
        self.vision.setText("sees images" if sees else "text only" if note else "")
        self.vision.setToolTip(f"The loaded model reads pictures (its projector {s.projector_name} was loaded): "
                               "attach, paste or drop PNG, JPEG or WebP" if sees else note)
        self.vision.setStyleSheet("QLabel { border: 1px solid rgba(56, 132, 244, 170); border-radius: 7px; padding: 0 5px; }"
                                  if sees else "QLabel { color: rgb(128, 128, 128); }")
        self.vision.setVisible(bool(self.vision.text()))

    def _sync(self, *_: object) -> None:
        self._show_vision()
        loaded = self.is_loaded()
        self.load_btn.setEnabled(self.current() is not None and not self.session.busy and not loaded)
        self.load_btn.setToolTip("Loaded: pick another model or context to load it" if loaded
                                 else "Load the chosen model with this draft and context")

    # -- load ----------------------------------------------------------------------------
    def load(self) -> None:
        c = self.current()
        if c is None:
            return
        key = self.draft.currentData()
        draft: Any = c.draft if key == "model" and c.draft is not None else (key if key in ("lookup", "mtp", "suffix") else None)
        self.session.load(c.target, draft, label=c.label, pair_id=c.pair_id, n_ctx=self.n_ctx())
