"""MkDocs hook: parameter tables generated from the one declaration of each parameter.

A line ``<!-- params: ssmts.training.params.BackboneParams -->`` in a page becomes a table
(name, default, allowed values, meaning) of that group's parameters, read from
``ssmts.training.config`` declarations, so the guides cannot drift from the code.
``<!-- params: ssmts.sktime.SSMForecaster Forecaster -->`` limits it to one docs group.
A reference to a page in a parameter's doc (``docs/concepts.md#bidirectional-layers``, the form
the docstrings use) becomes a link relative to the page, which ``mkdocs build --strict`` checks.
"""

from __future__ import annotations

import importlib
import posixpath
import re

from mkdocs.exceptions import PluginError

_MARKER = re.compile(r"^<!-- params: ([\w.]+)(?: (\w+))? -->$", re.MULTILINE)
_DOCS_REFERENCE = re.compile(r"\bdocs/([\w./-]+\.md)(#[\w-]+)?")


def _links(text: str, page) -> str:
    """``docs/x.md#anchor`` -> a Markdown link to that page from the page being built."""
    here = posixpath.dirname(page.file.src_uri) or "."
    return _DOCS_REFERENCE.sub(
        lambda m: f"[{m.group(0)}]({posixpath.relpath(m.group(1), here)}{m.group(2) or ''})", text
    )


def _table(match: re.Match, page) -> str:
    path, group = match.group(1), match.group(2)
    module, _, name = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        raise PluginError(f"{page.file.src_path}: cannot document parameters of {path}: {error}") from error
    rows = ["| parameter | default | allowed | meaning |", "|---|---|---|---|"]
    for p in cls.__params__.values():
        if group and p.group != group:
            continue
        allowed = p.constraint.describe() if p.constraint is not None else ""
        rows.append(f"| `{p.name}` | `{p.default!r}` | {allowed.replace('|', '/')} | {_links(p.doc, page)} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return _MARKER.sub(lambda m: _table(m, page), markdown)
