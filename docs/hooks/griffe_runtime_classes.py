"""Griffe extension: document classes whose docstring and constructor are assembled at import time.

The ssmts estimators share one parameter list: their ``__init__`` is built by
``ssmts.estimators._params.make_init`` (an explicit keyword-only signature that
scikit-learn's ``get_params`` reads) and their ``__doc__`` is concatenated from
``PARAMETER_DOCS``. Static analysis of the source sees neither, so for every class whose
``__init__`` is not a plain ``def`` in the class body, or whose docstring is not a
literal, this extension imports the class and takes

* the constructor signature from ``inspect.signature`` (names, kinds, defaults), and
* the docstring from ``__doc__``, turning its indented parameter list

      Parameters
          Group
              name : type, default X. Description,
                  continued on deeper-indented lines.
              first, second : shared description.

  into parameter tables (one per group), and parsing the rest as a NumPy-style docstring.

Enabled in mkdocs.yml under the python handler's ``extensions``.
"""
from __future__ import annotations

import importlib
import inspect
import re

import griffe

_ENTRY = re.compile(r"^(?P<names>[A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s+:\s+(?P<text>.*)$")
_GROUP = re.compile(r"^[A-Z][A-Za-z ]*$")


class RuntimeAssembledClasses(griffe.Extension):
    """Fill in constructors and docstrings that only exist once the module is imported."""

    def on_class_members(self, *, node, cls: griffe.Class, agent, **kwargs) -> None:
        init = cls.members.get("__init__")
        dynamic_init = init is not None and not init.is_function
        var_keyword_init = init is not None and init.is_function and _only_var_keyword(init)
        if not (dynamic_init or var_keyword_init or cls.docstring is None):
            return
        try:
            runtime = getattr(importlib.import_module(cls.module.path), cls.name)
        except Exception:  # noqa: BLE001 - leave the static view when the import fails
            return
        if not inspect.isclass(runtime):
            return
        if dynamic_init or var_keyword_init:
            cls.set_member("__init__", _constructor(runtime, cls))
        if runtime.__doc__ and (cls.docstring is None or dynamic_init):
            defaults = {
                name: repr(p.default)
                for name, p in inspect.signature(runtime.__init__).parameters.items()
                if p.default is not inspect.Parameter.empty
            }
            cls.docstring = _docstring(inspect.cleandoc(runtime.__doc__), cls, defaults)


def _only_var_keyword(function: griffe.Function) -> bool:
    kinds = [p.kind for p in function.parameters if p.name != "self"]
    return kinds == [griffe.ParameterKind.var_keyword]


def _constructor(runtime: type, cls: griffe.Class) -> griffe.Function:
    signature = inspect.signature(runtime.__init__)
    parameters = griffe.Parameters(*[
        griffe.Parameter(
            p.name,
            kind=griffe.ParameterKind(p.kind.description),
            default=None if p.default is inspect.Parameter.empty else repr(p.default),
        )
        for p in signature.parameters.values()
    ])
    return griffe.Function("__init__", parameters=parameters, parent=cls)


def _docstring(text: str, cls: griffe.Class, defaults: dict[str, str]) -> griffe.Docstring:
    remaining, groups, notes = _split_parameter_block(text)
    docstring = griffe.Docstring(remaining, parent=cls, parser="numpy")
    sections = docstring.parse()
    parameter_sections = []
    for group, entries in groups:
        parameters = []
        for name, text in entries:
            annotation, description = _type_and_description(text)
            parameters.append(griffe.DocstringParameter(
                name, annotation=annotation, description=description, value=defaults.get(name),
            ))
        parameter_sections.append(
            griffe.DocstringSectionParameters(parameters, title=f"{group} parameters" if group else None)
        )
    if notes:
        parameter_sections.append(griffe.DocstringSectionText(" ".join(notes)))
    # Parameters after the summary text, before the other sections (attributes, examples).
    position = 1 if sections and isinstance(sections[0], griffe.DocstringSectionText) else 0
    sections[position:position] = parameter_sections
    docstring.__dict__["parsed"] = sections  # Docstring.parsed is a cached property
    return docstring


def _type_and_description(text: str) -> tuple[str | None, str]:
    """'int, default 64. Width H.' -> ('int', 'Width H.'); defaults come from the signature."""
    cut = text.find(". ")
    head, description = (text[:cut], text[cut + 2 :]) if cut >= 0 else (text.rstrip("."), "")
    if head.startswith("default"):
        return None, text  # e.g. "defaults 0.1, 10, 1e-4." for a group of parameters
    kind = re.split(r",\s*defaults?\b", head, maxsplit=1)[0].strip()
    return (kind or None), description


def _split_parameter_block(text: str):
    """(text without the indented Parameters block, [(group, [(name, description)])], notes)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "Parameters"), None)
    if start is None or (start + 1 < len(lines) and set(lines[start + 1].strip()) == {"-"}):
        return text, [], []  # no block, or a standard NumPy-style section
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end].startswith(" ")):
        end += 1
    groups: list[tuple[str, list[list[str]]]] = []
    notes: list[str] = []
    for line in lines[start + 1 : end]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        content = line.strip()
        if indent <= 4:
            if _GROUP.match(content):
                groups.append((content, []))
            else:
                notes.append(content)
            continue
        match = _ENTRY.match(content)
        if indent <= 8 and match:
            if not groups:
                groups.append(("", []))
            groups[-1][1].append([match["names"], match["text"]])
        elif groups and groups[-1][1]:
            groups[-1][1][-1][1] += " " + content  # continuation of the previous entry
        else:
            notes.append(content)
    parsed = []
    for group, entries in groups:
        expanded = []
        for names, description in entries:
            for name in (n.strip() for n in names.split(",")):
                expanded.append((name, description))
        parsed.append((group, expanded))
    remaining = "\n".join(lines[:start] + lines[end:]).strip()
    return remaining, parsed, notes
