"""The report's single self-contained HTML page: tables inline, plots as data: URIs."""
from __future__ import annotations

import html
from dataclasses import dataclass

import pandas as pd

STYLE = """body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eceff1}
h2{border-bottom:2px solid #455a64;margin-top:2em}.empty{color:#888;font-style:italic}img{max-width:100%}
.scroll{overflow-x:auto}"""


@dataclass(frozen=True, slots=True)
class Section:
    title: str
    intro: str
    table: pd.DataFrame
    csv_name: str
    plot_png_b64: str | None = None


def _table_html(table: pd.DataFrame) -> str:
    if table.empty:
        return '<p class="empty">no data for this month</p>'
    rendered = table.to_html(index=False, float_format=lambda v: f"{v:,.2f}", na_rep="–", border=0)
    return f'<div class="scroll">{rendered}</div>'  # wide tables scroll instead of widening the page


def render(title: str, subtitle: str, sections: list[Section]) -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1><p>{html.escape(subtitle)}</p>"]
    for s in sections:
        parts.append(f"<h2>{html.escape(s.title)}</h2><p>{html.escape(s.intro)} "
                     f"(<a href='{html.escape(s.csv_name)}'>{html.escape(s.csv_name)}</a>)</p>")
        if s.plot_png_b64:
            parts.append(f"<img alt='{html.escape(s.title)}' src='data:image/png;base64,{s.plot_png_b64}'>")
        parts.append(_table_html(s.table))
    parts.append("</body></html>\n")
    return "\n".join(parts)
