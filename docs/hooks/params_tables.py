"""MkDocs hook: parameter tables generated from the one declaration of each parameter.

A line ``<!-- params: ssmts.training.params.BackboneParams -->`` in a page becomes a table
(name, default, allowed values, meaning) of that group's parameters, read from
``ssmts.training.config`` declarations, so the guides cannot drift from the code.
``<!-- params: ssmts.sktime.SSMForecaster Forecaster -->`` limits it to one docs group.
A group's table also names the faces whose default differs from the declaration (a face sets its
own with ``_param_defaults``), and ``<!-- defaults: faces -->`` becomes the table of every such
parameter against every face: the effective defaults, in one place.
A reference to a page in a parameter's doc (``docs/concepts.md#bidirectional-layers``, the form
the docstrings use) becomes a link relative to the page, which ``mkdocs build --strict`` checks.
"""

from __future__ import annotations

import importlib
import posixpath
import re

from mkdocs.exceptions import PluginError

_MARKER = re.compile(r"^<!-- params: ([\w.]+)(?: (\w+))? -->$", re.MULTILINE)
_FACES_MARKER = re.compile(r"^<!-- defaults: faces -->$", re.MULTILINE)
FACES = (
    "ssmts.SSMClassifier",
    "ssmts.SSMRegressor",
    "ssmts.SSMTransformer",
    "ssmts.SSMFeatureClassifier",
    "ssmts.SSMFeatureRegressor",
    "ssmts.SSMFeatureTransformer",
    "ssmts.sktime.SSMForecaster",
    "ssmts.sktime.SSMPanelClassifier",
    "ssmts.sktime.SSMPanelRegressor",
    "ssmts.sktime.SSMFeaturePanelClassifier",
    "ssmts.sktime.SSMFeaturePanelRegressor",
    "ssmts.sktime.SSMFeaturePanelTransformer",
)


def _faces() -> list[type]:
    found = []
    for path in FACES:
        module, _, name = path.rpartition(".")
        found.append(getattr(importlib.import_module(module), name))
    return found


def _differing(name: str, default) -> str:
    """The faces whose effective default of `name` is not the declared one, with theirs."""
    return ", ".join(
        f"{face.__name__} `{face.__params__[name].default!r}`"
        for face in _faces()
        if name in face.__params__ and face.__params__[name].default != default
    )


def _faces_table(match: re.Match, page) -> str:
    faces = _faces()
    names = sorted({name for face in faces for name, p in face.__params__.items() if p.default != _declared(name, p)})
    rows = ["| parameter | declared | " + " | ".join(f.__name__ for f in faces) + " |"]
    rows.append("|---|---|" + "---|" * len(faces))
    for name in names:
        declared = next(_declared(name, f.__params__[name]) for f in faces if name in f.__params__)
        cells = [f"`{f.__params__[name].default!r}`" if name in f.__params__ else "" for f in faces]
        rows.append(f"| `{name}` | `{declared!r}` | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _declared(name: str, param):
    """The default where the parameter is declared (ssmts.training.params or the face's own group)."""
    from ssmts.training import params as groups

    for group in vars(groups).values():
        declared = getattr(group, "__dict__", {}).get("__params__", {})
        if isinstance(group, type) and name in declared and declared[name].group == param.group:
            return declared[name].default
    return param.default


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
        differing = _differing(p.name, p.default)
        default = f"`{p.default!r}`" + (f" ({differing})" if differing else "")
        rows.append(f"| `{p.name}` | {default} | {allowed.replace('|', '/')} | {_links(p.doc, page)} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page, config, files) -> str:
    markdown = _FACES_MARKER.sub(lambda m: _faces_table(m, page), markdown)
    return _MARKER.sub(lambda m: _table(m, page), markdown)
