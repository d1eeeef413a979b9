"""The Bench page's results table: its columns (short titles, each explained on hover), the
table model that colours and formats a row, and the Chat setting a row stands for."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtGui import QColor

from engine.measure import bench

from .. import theme
from ..widgets.controls.table_model import RowsTableModel

COLUMNS = [
    # short titles (each explained on hover) so that the table fits beside the settings at 1024 px
    ("suite", "Suite"), ("config", "Mode"), ("tok_s_median", "tok/s"), ("wall_speedup_median", "Wall ×"),
    ("speedup_median", "Decode ×"), ("predicted_speedup", "Pred. ×"), ("acceptance_median", "Accept"),
    ("tokens_per_step_median", "Tok/step"), ("ttft_median", "TTFT s"), ("identical", "Same"),
]
COLUMN_TIPS = {
    "suite": "The prompt suite: a built-in one or your own file",
    "config": "target = the target model alone (the reference every ratio is measured against)\n"
              "k=N = the draft proposes N tokens per step; auto = Tandem picks k each step from measured costs\n"
              "lookup = drafts copied from the prompt and earlier text (no draft model)",
    "tok_s_median": "Decode speed: generated tokens per second after the first token (median over prompts and repetitions)",
    "wall_speedup_median": "The headline: target alone's wall-clock ÷ this run's, prompt in to last token out\n"
                           "(prefill, the draft's reading and drafting included: what you wait for), median; range on hover",
    "speedup_median": "Decode tok/s ÷ target-alone tok/s for the same prompt and repetition: median; range on hover.\n"
                      "Green or red only when every repetition agrees, so noise cannot explain it",
    "predicted_speedup": "What the cost model predicts from this run's measured step costs and acceptance;\n"
                         "far from Decode × means the model misjudges this machine",
    "acceptance_median": "Share of drafted tokens the target kept (median)",
    "tokens_per_step_median": "Tokens written per target pass; 1.00 means no drafted token was kept",
    "ttft_median": "Time to first token in seconds: reading the prompt (median)",
    "identical": "Runs whose output equals target alone's token for token (greedy decoding);\n"
                 "⚠ counts divergences larger than numeric noise (a bug)",
}


class ResultsModel(RowsTableModel):
    COLUMNS = [title for _, title in COLUMNS]

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.ToolTipRole:
            return COLUMN_TIPS[COLUMNS[section][0]]
        return super().headerData(section, orientation, role)

    def data(self, index: QModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        r = self.rows[index.row()]
        key = COLUMNS[index.column()][0]
        if role == Qt.ItemDataRole.DisplayRole:
            v = getattr(r, key)
            if key in ("speedup_median", "wall_speedup_median"):
                return f"{v:.2f}x"  # the range is in the tooltip: the table fits a 1024-px window
            if key == "predicted_speedup":
                return "–" if v is None else f"{v:.2f}x"
            if key == "acceptance_median":
                return "–" if r.mode == "target" else f"{v:.0%}"
            if key == "identical":
                return "–" if not r.compared else f"{r.identical}/{r.compared}" + (f"  ⚠ {r.bugs}" if r.bugs else "")
            if isinstance(v, float):
                return f"{v:.2f}" if key != "tok_s_median" else f"{v:.1f}"
            return str(v)
        if role == Qt.ItemDataRole.ForegroundRole and key == "speedup_median":
            verdict, _why = r.speedup_verdict()
            pal = theme.palette(False)
            return None if verdict is None else QColor(pal.gain if verdict == "gain" else pal.loss)
        if role == Qt.ItemDataRole.ToolTipRole:
            if key == "speedup_median":
                return f"{r.speedup_verdict()[1]}; all runs {r.speedup_min:.2f}–{r.speedup_max:.2f}x"
            if key == "suite":
                return r.suite  # the whole name: a narrow table elides it
            if key == "wall_speedup_median":
                return f"wall-clock ratio over {r.runs} runs: {r.wall_speedup_min:.2f}–{r.wall_speedup_max:.2f}x"
            return COLUMN_TIPS[key]
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() >= 2:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


def chat_setting(row: bench.Row) -> dict[str, Any]:
    """The Chat settings that reproduce a results row: its drafter and lookahead."""
    if row.mode == "target":
        return {"drafter": "none", "lookahead": "auto"}
    drafter = "lookup" if row.mode == "lookup" or row.config.startswith("lookup") else "model"
    return {"drafter": drafter, "lookahead": row.lookahead if isinstance(row.lookahead, int) else "auto"}

