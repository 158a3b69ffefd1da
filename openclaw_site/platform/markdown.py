"""Markdown for reading: memory documents and compaction summaries shown as HTML, safely.

markdown-it-py renders CommonMark (plus tables and strikethrough) with raw HTML turned off, and nh3
(the Rust sanitizer ammonia) then keeps only a fixed list of tags and attributes and http(s) and
mailto links, so neither a document's text nor a bug in the renderer can put a script, an event
handler or a style into the page (docs/dependencies.md). Pure: no Django import.
"""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

_RENDERER = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])

ALLOWED_TAGS = frozenset(
    {
        "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "li",
        "ol", "p", "pre", "s", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
    }
)  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "th": {"style"}, "td": {"style"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})


def render_markdown(text: str) -> str:
    """Return ``text`` as sanitized HTML (no images, no raw HTML, links open nothing but the web)."""
    html = _RENDERER.render(text or "")
    return nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
        filter_style_properties={"text-align"},
    )
