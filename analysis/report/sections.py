"""A report is an ordered list of sections; this module writes one, whatever the kind of study.

A section is a part of the document (headings, paragraphs, tables, figures, as analysis.report.document blocks)
with what it writes beside it: CSV tables under tables/, PNG figures under figures/ and, when asked, LaTeX
tables under latex/. A study kind's analysis part (analysis/kinds/) builds its sections in the order a reader
needs them, options add theirs (the model-assisted section of a judge, analysis.report.judged), and studies
linked by compare_with add a section each; `write_report` writes them all: report.md, report.html
(self-contained: figures inlined), and the files, returning their paths by name.

>>> import tempfile
>>> from pathlib import Path
>>> from empeval.analysis.report.document import Paragraph
>>> report = Report("Human evaluation report: pilot", [Section("summary", [Paragraph("12 ratings.")])])
>>> paths = write_report(report, Path(tempfile.mkdtemp()))
>>> sorted(paths), paths["markdown"].read_text().splitlines()[2]
(['html', 'markdown'], '12 ratings.')
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from empeval.analysis.report.document import Block, Document, to_html, to_markdown
from empeval.analysis.report.folder import replaced_folder


@dataclass
class Section:
    """One part of a report: its blocks, in order, and the files it writes beside the document, by name (a name is
    also the file's stem: tables/<name>.csv, figures/<name>.png, latex/<name>.tex)."""

    name: str
    blocks: list[Block]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, bytes] = field(default_factory=dict)
    latex: dict[str, str] = field(default_factory=dict)


@dataclass
class Report:
    """A report's title and its sections, in order."""

    title: str
    sections: list[Section]

    def add(self, *sections: Section | None) -> None:
        """Add sections at the end; None (a section that has nothing to say) is skipped."""
        self.sections += [section for section in sections if section is not None]


def write_report(report: Report, out_dir: Path, *, latex: bool = False,
                 files: dict[str, str] | None = None) -> dict[str, Path]:
    """Write `report` under `out_dir`: report.md and report.html, and each section's files (tables/*.csv,
    figures/*.png, with `latex` latex/*.tex), and `files` (further text files by name, report.json). Returns the
    paths: "markdown", "html", one "table_<name>", "figure_<name>" and "latex_<name>" per file written. Folders are
    made only for what is written.

    The folder is replaced whole (analysis.report.folder): the files go to a new folder beside it, renamed into
    place once all are written, so an interrupted run leaves the previous report as it was and no half report; a
    folder holding other files than a report's is refused (ReportRefused) before anything is written."""
    out_dir = Path(out_dir)
    paths: dict[str, Path] = {}
    with replaced_folder(out_dir) as folder:
        for what, subfolder, suffix in (("figure", "figures", ".png"), ("table", "tables", ".csv"),
                                        ("latex", "latex", ".tex")):
            for section in report.sections:
                written = {"figure": section.figures, "table": section.tables,
                           "latex": section.latex if latex else {}}
                for name, content in written[what].items():
                    (folder / subfolder).mkdir(exist_ok=True)
                    path = folder / subfolder / f"{name}{suffix}"
                    if isinstance(content, pd.DataFrame):
                        content.to_csv(path, index=False)
                    elif isinstance(content, bytes):
                        path.write_bytes(content)
                    else:
                        path.write_text(content, encoding="utf-8")
                    paths[f"{what}_{name}"] = out_dir / subfolder / path.name
        document = Document(title=report.title,
                            blocks=[block for section in report.sections for block in section.blocks])
        (folder / "report.md").write_text(to_markdown(document), encoding="utf-8")
        (folder / "report.html").write_text(to_html(document), encoding="utf-8")
        for name, text in (files or {}).items():
            (folder / name).write_text(text, encoding="utf-8")
    return {"markdown": out_dir / "report.md", "html": out_dir / "report.html", **paths}
