"""The one configuration source: every backbone and training parameter, declared once.

A parameter is declared as an annotated class attribute of a parameter group,

    class BackboneParams(Configurable):
        d_model: int = param(default=64, doc="Width H of every block.", constraint=Integer(1))

with its type (the annotation), default, allowed values (a constraint) and a one-line doc.
A face (an sklearn or sktime estimator, the Trainer's settings, a task preset) inherits the
groups it takes; `Configurable` then gives it

* an explicit keyword-only ``__init__`` that stores each argument unmodified (what
  scikit-learn's and sktime's ``get_params``/``clone`` need), visible to ``help()`` and
  ``inspect.signature`` and, through ``typing.dataclass_transform``, to IDEs and type checkers;
* ``validate_params()``: every value checked against its declaration, with a message
  that names the parameter (called at fit time, as scikit-learn does);
* the "Parameters" block of its docstring, generated from the declarations.

A face may change a default (``_param_defaults = {"d_model": 32}``) without redeclaring it.
"""

from __future__ import annotations

import inspect
import math
import numbers
import sys
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # Python 3.10
    from typing_extensions import dataclass_transform

T = TypeVar("T")


class InvalidParameterError(ValueError, TypeError):
    """A parameter value outside its declaration (both a ValueError and a TypeError, as in scikit-learn)."""


# ---------------------------------------------------------------------------- constraints
class Constraint:
    """Allowed values of a parameter: `accepts(value)` and a phrase for messages and docs."""

    def accepts(self, value) -> bool:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


@dataclass(frozen=True)
class Integer(Constraint):
    """An int (not a bool, not a float with an integral value) in [low, high]."""

    low: int | None = None
    high: int | None = None

    def accepts(self, value) -> bool:
        return _is_int(value) and (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def describe(self) -> str:
        return "an integer" + (
            " " + _range_text(self.low, self.high, "both") if (self.low, self.high) != (None, None) else ""
        )


@dataclass(frozen=True)
class Real(Constraint):
    """A finite real number (not a bool) in the interval; closed: "both", "left", "right" or "neither"."""

    low: float | None = None
    high: float | None = None
    closed: str = "both"

    def accepts(self, value) -> bool:
        if not _is_real(value) or not math.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (value == self.low and self.closed in ("right", "neither"))):
            return False
        if self.high is not None and (value > self.high or (value == self.high and self.closed in ("left", "neither"))):
            return False
        return True

    def describe(self) -> str:
        if (self.low, self.high) == (None, None):
            return "a finite number"
        return _range_text(self.low, self.high, self.closed) + " and finite"


def _range_text(low, high, closed: str) -> str:
    """'>= 1', '> 0', 'in [0, 1)' ..."""
    if low is not None and high is not None:
        left = "[" if closed in ("both", "left") else "("
        right = "]" if closed in ("both", "right") else ")"
        return f"in {left}{low}, {high}{right}"
    if low is not None:
        return f"{'>=' if closed in ('both', 'left') else '>'} {low}"
    if high is not None:
        return f"{'<=' if closed in ('both', 'right') else '<'} {high}"
    return ""


@dataclass(frozen=True)
class Options(Constraint):
    """One of the listed values, of the same type (so 1 is not True and 'no' is not a bool)."""

    values: tuple

    def __init__(self, *values):
        object.__setattr__(self, "values", tuple(values))

    def accepts(self, value) -> bool:
        return any(type(value) is type(option) and value == option for option in self.values) or (
            isinstance(value, np.bool_) and any(option is bool(value) for option in self.values)
        )

    def describe(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)


@dataclass(frozen=True)
class Boolean(Constraint):
    """True or False (numpy booleans too); not 0/1, not a string."""

    def accepts(self, value) -> bool:
        return isinstance(value, (bool, np.bool_))

    def describe(self) -> str:
        return "a bool"


@dataclass(frozen=True)
class NoneOr(Constraint):
    inner: Constraint

    def accepts(self, value) -> bool:
        return value is None or self.inner.accepts(value)

    def describe(self) -> str:
        return f"None or {self.inner.describe()}"


@dataclass(frozen=True)
class AnyOf(Constraint):
    options: tuple

    def __init__(self, *options: Constraint):
        object.__setattr__(self, "options", tuple(options))

    def accepts(self, value) -> bool:
        return any(option.accepts(value) for option in self.options)

    def describe(self) -> str:
        return " or ".join(option.describe() for option in self.options)


@dataclass(frozen=True)
class Satisfies(Constraint):
    """A value for which `check(value)` is true; `text` says what that means. choice: the
    allowed values are names (a bad one is "unknown")."""

    check: Any
    text: str
    choice: bool = False

    def accepts(self, value) -> bool:
        return bool(self.check(value))

    def describe(self) -> str:
        return self.text


# ---------------------------------------------------------------------------- declarations
@dataclass(frozen=True)
class Param:
    """One parameter: name, default, one-line doc, constraint, type text and docs group."""

    name: str
    default: Any
    doc: str
    constraint: Constraint | None
    group: str
    annotation: str = ""

    def check(self, value, owner: str) -> None:
        c = self.constraint
        if c is None or c.accepts(value):
            return
        if isinstance(c, Options) or (isinstance(c, Satisfies) and c.choice):
            message = f"unknown {self.name} {value!r}; choose {c.describe()}"
        elif isinstance(c, NoneOr):
            message = f"{self.name} must be {c.inner.describe()} or None, got {value!r}"
        else:
            message = f"{self.name} must be {c.describe()}, got {value!r}"
        raise InvalidParameterError(f"{message} (parameter of {owner})")


class _ParamSpec:
    """What `param(...)` leaves in a class body until `Configurable.__init_subclass__` reads it."""

    __slots__ = ("default", "doc", "constraint", "group")

    def __init__(self, default, doc, constraint, group):
        self.default, self.doc, self.constraint, self.group = default, doc, constraint, group


def param(*, default: T, doc: str, constraint: Constraint | None = None, group: str | None = None) -> T:
    """Declare a parameter in a Configurable class body (typed as its default for type checkers,
    which read `default=` as the field's default through typing.dataclass_transform)."""
    return _ParamSpec(default, doc, constraint, group)  # type: ignore[return-value]


@dataclass_transform(kw_only_default=True, field_specifiers=(param,))
class Configurable:
    """Base of every parameter group and of every class configured by them (see the module doc).

    Subclasses list their parameters as ``name: type = param(default=..., doc=..., constraint=...)``.
    ``_params_group`` names the docs section of the group's parameters; ``_param_defaults``
    changes inherited defaults.
    """

    __params__: ClassVar[dict[str, Param]] = {}
    _params_group: ClassVar[str] = "Parameters"
    _param_defaults: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        params: dict[str, Param] = {}
        # Bases in MRO order: the first-listed group's parameters come first, and the most
        # derived declaration of a name wins.
        for base in cls.__mro__[1:]:
            for name, declared in base.__dict__.get("__params__", {}).items():
                params.setdefault(name, declared)
        annotations = cls.__dict__.get("__annotations__", {})
        group = cls.__dict__.get("_params_group", None)
        for name, value in list(cls.__dict__.items()):
            if isinstance(value, _ParamSpec):
                params.pop(name, None)
                params[name] = Param(
                    name,
                    value.default,
                    value.doc,
                    value.constraint,
                    value.group or group or "Parameters",
                    _annotation_text(annotations.get(name)),
                )
                delattr(cls, name)  # the instance attribute set by __init__ is the only value
        for name, default in cls.__dict__.get("_param_defaults", {}).items():
            if name not in params:
                raise TypeError(f"{cls.__name__}._param_defaults names {name!r}, which is not one of its parameters")
            old = params[name]
            params[name] = Param(name, default, old.doc, old.constraint, old.group, old.annotation)
        cls.__params__ = params
        if "__init__" not in cls.__dict__:
            cls.__init__ = _make_init(cls, params)

    # ------------------------------------------------------------ API
    @classmethod
    def param_names(cls) -> tuple[str, ...]:
        return tuple(cls.__params__)

    @classmethod
    def param_defaults(cls) -> dict[str, Any]:
        return {name: p.default for name, p in cls.__params__.items()}

    def param_values(self, group: type[Configurable] | None = None) -> dict[str, Any]:
        """{name: value} of this object's parameters, or of those declared by `group`."""
        names = self.__params__ if group is None else group.__params__
        return {name: getattr(self, name) for name in names}

    def validate_params(self) -> None:
        """Check every parameter against its declaration; InvalidParameterError names the first bad one."""
        owner = type(self).__name__
        for name, declared in self.__params__.items():
            declared.check(getattr(self, name), owner)

    @classmethod
    def params_doc(cls, names=None) -> str:
        """The indented "Parameters" block of the docstring: one section per group."""
        return params_doc(cls.__params__, names)


def params_of(group: type[Configurable], *names: str) -> type[Configurable]:
    """A parameter group of just `names`, with the declarations of `group` (not copies): for a face
    that takes a few parameters of a group whose other parameters do not apply to it."""
    missing = [name for name in names if name not in group.__params__]
    if missing:
        raise TypeError(f"{group.__name__} declares no parameter(s) {missing}")
    subset = type(f"{group.__name__}Subset", (Configurable,), {"__module__": group.__module__})
    subset.__params__ = {name: group.__params__[name] for name in names}
    return subset


def _annotation_text(annotation) -> str:
    if annotation is None:
        return ""
    return annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))


def _make_init(cls, params: dict[str, Param]):
    names = tuple(params)

    def __init__(self, **kwargs):
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unexpected parameter(s) {unknown}")
        for name in names:
            setattr(self, name, kwargs[name] if name in kwargs else params[name].default)
        # The next class in the MRO that is not a parameter group (sktime's BaseObject needs its __init__).
        super(Configurable, self).__init__()

    __init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [
            inspect.Parameter(
                n,
                inspect.Parameter.KEYWORD_ONLY,
                default=params[n].default,
                annotation=params[n].annotation or inspect.Parameter.empty,
            )
            for n in names
        ]
    )
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__doc__ = f"Store the parameters of {cls.__name__} unmodified (validated at fit)."
    return __init__


def params_doc(params: dict[str, Param], names=None) -> str:
    """Docstring block: "Parameters" / group / "name : type, default X. Doc." (docs/hooks parses it)."""
    chosen = [params[n] for n in (names or params)]
    groups: dict[str, list[Param]] = {}
    for p in chosen:
        groups.setdefault(p.group, []).append(p)
    lines = ["Parameters"]
    for group, members in groups.items():
        lines.append(f"    {group}")
        for p in members:
            kind = _type_text(p)
            lines.append(f"        {p.name} : {kind}, default {p.default!r}. {p.doc}")
    return "\n".join(lines) + "\n"


def _type_text(p: Param) -> str:
    c = p.constraint
    if isinstance(c, Options):
        return "{" + ", ".join(repr(v) for v in c.values) + "}"
    if isinstance(c, NoneOr) and isinstance(c.inner, Options):
        return "None or {" + ", ".join(repr(v) for v in c.inner.values) + "}"
    return p.annotation or "object"


def with_params_doc(cls):
    """Class decorator: put the generated "Parameters" block into the class docstring, after the
    summary and before the first NumPy-style section (Attributes, Examples ...), if any."""
    lines = inspect.cleandoc(cls.__doc__ or "").splitlines()
    cut = next(
        (i for i in range(len(lines) - 1) if lines[i].strip() and set(lines[i + 1].strip()) == {"-"}), len(lines)
    )
    head, tail = "\n".join(lines[:cut]).rstrip(), "\n".join(lines[cut:])
    cls.__doc__ = head + "\n\n" + cls.params_doc() + ("\n" + tail if tail else "")
    return cls
