"""MkDocs hook: render the pages' LaTeX to MathML when the site is built.

``pymdownx.arithmatex`` (generic mode) protects ``$...$`` / ``$$...$$`` from Markdown and
wraps it in ``<span class="arithmatex">\\(...\\)</span>`` or ``<div class="arithmatex">\\[...\\]</div>``.
This hook replaces those wrappers with MathML produced by ``latex2mathml``, so the
built site shows equations without JavaScript or a network connection (browsers
render MathML natively: Chrome/Edge 109+, Firefox, Safari). A formula that
latex2mathml cannot convert fails the build, naming the page and the formula.

``\\bar{x}`` is written as ``\\overline{x}``: latex2mathml renders \\bar as a stretchy
macron that Chrome draws inconsistently at text size (sometimes not at all), while
\\overline becomes an accent bar that is drawn reliably.
"""

from __future__ import annotations

import html
import re

from latex2mathml.converter import convert
from mkdocs.exceptions import PluginError

_INLINE = re.compile(r'<span class="arithmatex">\\\((.+?)\\\)</span>', re.DOTALL)
_DISPLAY = re.compile(r'<div class="arithmatex">\\\[(.+?)\\\]</div>', re.DOTALL)
_BAR = re.compile(r"\\bar(?![a-zA-Z])")


def _mathml(latex: str, display: str, page) -> str:
    source = _BAR.sub(r"\\overline", html.unescape(latex).strip())
    try:
        return convert(source, display=display)
    except Exception as error:  # latex2mathml raises several exception types
        raise PluginError(f"{page.file.src_uri}: cannot render formula {source!r} to MathML: {error}") from error


def _check_headings(items, page) -> None:
    """Math in a heading would appear as raw LaTeX in the table of contents."""
    for item in items:
        if "\\(" in item.title or "\\[" in item.title:
            raise PluginError(
                f"{page.file.src_uri}: heading {item.title!r} contains a formula, which the table of "
                "contents shows as raw LaTeX; write the symbol in Unicode (e.g. Δ) instead"
            )
        _check_headings(item.children, page)


def on_page_content(html_text: str, page, config, files) -> str:
    _check_headings(page.toc, page)
    html_text = _DISPLAY.sub(
        lambda m: f'<div class="math-display">{_mathml(m.group(1), "block", page)}</div>', html_text
    )
    return _INLINE.sub(lambda m: _mathml(m.group(1), "inline", page), html_text)
