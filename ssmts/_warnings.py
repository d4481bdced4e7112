"""Warnings attributed to the user's line: the stack level of the first caller outside ssmts and
outside the libraries whose methods call into it (sktime's fit wraps the forecaster's _fit,
scikit-learn's wraps the estimators'), however many frames of theirs sit in between."""

from __future__ import annotations

import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def caller_stacklevel() -> int:
    """The `stacklevel` that warnings.warn, called by the function calling this, needs to name the
    first frame outside ssmts, sktime and scikit-learn (1 would name that function itself)."""
    skipped = [_PACKAGE_DIR]
    for name in ("sktime", "sklearn"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            skipped.append(os.path.dirname(os.path.abspath(module.__file__)) + os.sep)
    frame, level = sys._getframe(1), 1  # the function that warns
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(tuple(skipped)):
        frame, level = frame.f_back, level + 1
    return level
