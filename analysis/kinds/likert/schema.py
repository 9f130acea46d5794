"""The export contract: the columns of a study's ratings export, one row per rating.

Defined once, here: the store's exporter (server.annotation.export) writes exactly these columns in this
order, and analysis.kinds.likert.load reads them. The one module of analysis that code outside it may import for the
export; it imports nothing itself, so importing it costs nothing. How its cells are written to CSV (text a
spreadsheet would run as a formula behind a single quote, line breaks quoted) and read back is defined for every
kind's export in analysis.kinds.csv_cells.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExportColumn:
    """One column of the export: its name, the kind of value it holds, and what it means."""

    name: str
    kind: str  # text, integer, boolean, timestamp, number
    required: bool
    meaning: str


EXPORT_SCHEMA: tuple[ExportColumn, ...] = (
    ExportColumn("study", "text", True, "the study's name"),
    ExportColumn("item_id", "text", True, "the rated item: one dialogue context plus one response"),
    ExportColumn("context_id", "text", True, "the dialogue context, which pairs the systems"),
    ExportColumn("system", "text", True, "the system that wrote the response (a control's system for controls)"),
    ExportColumn("annotator", "text", True, "the annotator's pseudonym"),
    ExportColumn("criterion", "text", True, "the criterion rated (e.g. empathy)"),
    ExportColumn("score", "integer", True, "the score on the study's scale"),
    ExportColumn("position", "integer", False, "the item's position within its assignment (0-based)"),
    ExportColumn("is_control", "boolean", True, "whether the item is a control built to fail one criterion"),
    ExportColumn("control_kind", "text", False, "the control's system, for controls"),
    ExportColumn("control_target", "text", False, "the criterion a control is built to fail"),
    ExportColumn("assignment_id", "text", True, "the assignment the rating was given in"),
    ExportColumn("started_at", "timestamp", False, "when the annotator was handed the assignment (ISO-8601, UTC)"),
    ExportColumn("submitted_at", "timestamp", False, "when the rating was stored (ISO-8601, UTC)"),
    ExportColumn("seconds_on_item", "number", False, "seconds the annotator spent on the item, when measured"),
    ExportColumn("late", "boolean", False, "submitted after the assignment had expired"),
    ExportColumn("comment", "text", False, "the annotator's comment on the assignment, repeated on each of its rows "
                 "(empty when she left none)"),
    ExportColumn("item_comment", "text", False, "the annotator's comment on the item (studies with "
                 "design.item_comments), repeated on each rating of the item (empty when she left none)"),
)

EXPORT_COLUMNS: tuple[str, ...] = tuple(column.name for column in EXPORT_SCHEMA)
