"""The package version: its one declaration (pyproject.toml reads it), importable by every layer."""

__version__ = "0.1.0"
