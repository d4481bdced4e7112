"""MkDocs hook: parameter tables generated from the one declaration of each parameter.

A line ``<!-- params: ssmts.training.params.BackboneParams -->`` in a page becomes a table
(name, default, allowed values, meaning) of that group's parameters, read from
``ssmts.training.config`` declarations, so the guides cannot drift from the code.
``<!-- params: ssmts.sktime.SSMForecaster Forecaster -->`` limits it to one docs group.
"""

from __future__ import annotations

import importlib
import re

from mkdocs.exceptions import PluginError

_MARKER = re.compile(r"^<!-- params: ([\w.]+)(?: (\w+))? -->$", re.MULTILINE)


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
        rows.append(f"| `{p.name}` | `{p.default!r}` | {allowed.replace('|', '/')} | {p.doc} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return _MARKER.sub(lambda m: _table(m, page), markdown)
