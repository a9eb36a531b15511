"""Command-line options generated from dataclasses, so a parameter list is written once.

A field becomes an option when its metadata has a ``help`` (build it with :func:`option`);
a field without one (an internal knob, a nested object) is left to its default. The
field's type picks the argparse action: ``bool`` a ``--x/--no-x`` pair, ``tuple`` a
repeatable option, ``dict`` a repeatable option whose ``type`` parses one ``(key,
value)`` pair; an ``enum.Enum`` its values as choices (the dataclass converts the string);
anything else is parsed by the type itself. Other metadata keys go to
``add_argument`` as they are and win over those choices (``choices``, ``type``,
``metavar``, ``action``), plus:

- ``positional``: an optional positional argument instead of ``--name``;
- ``flags``: the option's names instead of ``--field-name`` (e.g. ``("-c",
  "--concurrency")``);
- ``default``: the command line's default where it differs from the dataclass's (the
  dataclass's own default is used otherwise, and unset options are not passed at all);
- ``convert``: a function from the parsed value to the field's value, applied by
  :func:`arguments_of` (its ValueError reaches the caller, who can name the option).

``conveyor serve`` (``server.settings``) and ``conveyor bench`` (``bench.cli``) both
build their options here; this module imports neither, so either may import it.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import types
from collections.abc import Sequence
from typing import Any, Union, get_args, get_origin, get_type_hints


def option(help: str, **extra: Any) -> dict[str, Any]:
    """A field's metadata that makes it a command-line option."""
    return {"help": help, **extra}


def add_arguments(parser: argparse.ArgumentParser | Any, cls: type) -> None:
    """Add one command-line option per field of the dataclass ``cls`` that has a ``help``.

    ``parser`` may also be an argument group.
    """
    hints = get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if "help" not in field.metadata:
            continue
        meta = dict(field.metadata)
        kind = _base_type(hints[field.name])
        positional = meta.pop("positional", False)
        flags = meta.pop("flags", None)
        meta.pop("convert", None)
        kwargs: dict[str, Any] = {"dest": field.name, "default": argparse.SUPPRESS}
        if kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif issubclass(kind, enum.Enum):  # its values are the choices; the field converts
            kwargs["type"] = str
            kwargs["choices"] = [member.value for member in kind]
        elif kind in (tuple, dict):
            kwargs["action"] = "append"
            kwargs["metavar"] = field.name.upper().removesuffix("S")
        else:
            kwargs["type"] = kind
        kwargs.update(meta)  # the field's own choices win
        if positional:
            del kwargs["dest"]
            parser.add_argument(field.name, nargs="?", **kwargs)
            continue
        if "(default:" not in kwargs["help"]:
            shown = kwargs["default"] if "default" in meta else field.default
            if shown is not dataclasses.MISSING:
                kwargs["help"] = f"{kwargs['help']} (default: {_shown(shown)})"
        names = flags or ("--" + field.name.replace("_", "-"),)
        parser.add_argument(*names, **kwargs)


def arguments_of(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The values given for ``cls``'s fields (lists become tuples, pair lists dicts)."""
    hints = get_type_hints(cls)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if not hasattr(args, field.name):
            continue
        value = getattr(args, field.name)
        if "convert" in field.metadata:
            value = field.metadata["convert"](value)
        elif isinstance(value, list):
            value = dict(value) if _base_type(hints[field.name]) is dict else tuple(value)
        values[field.name] = value
    return values


def from_arguments(args: argparse.Namespace, cls: type, **extra: Any) -> Any:
    """The dataclass ``cls`` from parsed options (and ``extra``); unset fields keep defaults."""
    return cls(**arguments_of(args, cls), **extra)


def _base_type(hint: Any) -> type:
    """``int`` from ``int``, ``str`` from ``str | None``, ``tuple`` from ``tuple[str, ...]``."""
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        hint = next(arg for arg in get_args(hint) if arg is not type(None))
        origin = get_origin(hint)
    return origin if origin is not None else hint


def _shown(default: Any) -> str:
    if default is None:
        return "none"
    if isinstance(default, Sequence) and not isinstance(default, str):
        return "none" if not default else ", ".join(map(str, default))
    return str(default)
