"""A minimal document model rendered to Markdown and to self-contained HTML.

The report is built once as a list of blocks and written twice, so the two files cannot disagree. All text
(system names, annotator ids, notes) is escaped for the target format: study data is untrusted input.
Inline emphasis is written ``**like this**`` in both paragraphs and table cells.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field

import pandas as pd


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Paragraph:
    text: str


@dataclass
class BulletList:
    items: list[str]
    literal: bool = False  # free text (annotators' comments): no **bold**, every line folded into one


@dataclass
class Table:
    frame: pd.DataFrame  # cells already formatted as text
    caption: str = ""


@dataclass
class Image:
    png: bytes
    relative_path: str  # where the Markdown file finds the PNG
    caption: str = ""


Block = Heading | Paragraph | BulletList | Table | Image


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> None:
        self.blocks.extend(blocks)


_BOLD = re.compile(r"\*\*(.+?)\*\*")
# Escape only what Markdown would read as markup: backslash, backtick, asterisk, pipe (tables), a "]" that
# would close a link, an underscore at a word edge, "<" opening a tag, ">" opening a quote. CIs such as
# "[0.31, 0.58]", "< 0.001" and "d_z" stay readable in the raw file.
_MARKDOWN_SPECIAL = re.compile(r"[\\`*|]|\](?=[(\[:])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|<(?=[A-Za-z/!?])|^>")


def _md_text(text: str) -> str:
    """Escape Markdown specials but keep the ``**bold**`` markers."""
    parts = [_MARKDOWN_SPECIAL.sub(lambda match: "\\" + match.group(0), part) for part in _BOLD.split(str(text))]
    return "".join(f"**{part}**" if i % 2 else part for i, part in enumerate(parts))


def _html_text(text: str) -> str:
    return _BOLD.sub(r"<strong>\1</strong>", html.escape(str(text)))


def _md_literal(text: str) -> str:
    """Free text as one Markdown line with nothing read as markup, ``**`` included."""
    return _MARKDOWN_SPECIAL.sub(lambda match: "\\" + match.group(0), " ".join(str(text).split()))


def _html_literal(text: str) -> str:
    return html.escape(" ".join(str(text).split()))


def to_markdown(document: Document) -> str:
    lines = [f"# {_md_text(document.title)}", ""]
    for block in document.blocks:
        if isinstance(block, Heading):
            lines += [f"{'#' * block.level} {_md_text(block.text)}", ""]
        elif isinstance(block, Paragraph):
            lines += [_md_text(block.text), ""]
        elif isinstance(block, BulletList):
            render = _md_literal if block.literal else _md_text
            lines += [f"- {render(item)}" for item in block.items] + [""]
        elif isinstance(block, Table):
            if block.caption:
                lines += [f"*{_md_text(block.caption)}*", ""]
            header = [_md_text(c) for c in block.frame.columns]
            lines.append("| " + " | ".join(header) + " |")
            lines.append("|" + "|".join("---" for _ in header) + "|")
            for row in block.frame.itertuples(index=False):
                lines.append("| " + " | ".join(_md_text(cell) for cell in row) + " |")
            lines.append("")
        elif isinstance(block, Image):
            lines += [f"![{_md_text(block.caption)}]({block.relative_path})", ""]
            if block.caption:
                lines += [f"*{_md_text(block.caption)}*", ""]
    return "\n".join(lines)


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 72rem; margin: 2rem auto;
       padding: 0 1rem; color: #1b1b1b; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
caption { caption-side: top; text-align: left; font-style: italic; padding-bottom: 0.3rem; }
figure { margin: 1rem 0 2rem; } figure img { max-width: 100%; }
figcaption { font-style: italic; font-size: 0.9rem; }
"""


def to_html(document: Document) -> str:
    """A single HTML file: inline CSS, figures embedded as base64 PNG, no external resources."""
    body = [f"<h1>{_html_text(document.title)}</h1>"]
    for block in document.blocks:
        if isinstance(block, Heading):
            level = min(max(block.level, 2), 6)
            body.append(f"<h{level}>{_html_text(block.text)}</h{level}>")
        elif isinstance(block, Paragraph):
            body.append(f"<p>{_html_text(block.text)}</p>")
        elif isinstance(block, BulletList):
            render = _html_literal if block.literal else _html_text
            body.append("<ul>" + "".join(f"<li>{render(item)}</li>" for item in block.items) + "</ul>")
        elif isinstance(block, Table):
            caption = f"<caption>{_html_text(block.caption)}</caption>" if block.caption else ""
            head = "".join(f"<th>{_html_text(c)}</th>" for c in block.frame.columns)
            rows = "".join(
                "<tr>" + "".join(f"<td>{_html_text(cell)}</td>" for cell in row) + "</tr>"
                for row in block.frame.itertuples(index=False)
            )
            body.append(f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(block, Image):
            encoded = base64.b64encode(block.png).decode("ascii")
            body.append(
                f'<figure><img alt="{html.escape(block.caption)}" src="data:image/png;base64,{encoded}">'
                f"<figcaption>{_html_text(block.caption)}</figcaption></figure>"
            )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{html.escape(document.title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
