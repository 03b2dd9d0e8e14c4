"""Errors that the command line turns into exit status 2 and one line on stderr."""

from __future__ import annotations

import importlib
from typing import Any


class InputError(Exception):
    """Bad input from a user: a config key, a trace row, a checkpoint, an argument.

    The message is one line that names where the problem is and what it is, for
    example ``trace.csv:3: duration: must be > 0, got -7`` or
    ``configs/x.yaml: topology.racks_per_subcluster: must be >= 1, got 0``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(printable(message.replace("\n", " ")))


def printable(text: str) -> str:
    """``text`` with control characters (ANSI escape sequences from a trace, a NUL, a
    carriage return) written as escapes (``\\x1b``), so that an error line shows what
    the input holds instead of acting on the terminal."""
    if all(map(_shown_as_is, text)):
        return text
    return "".join(
        c if _shown_as_is(c) else c.encode("unicode_escape").decode("ascii") for c in text
    )


def _shown_as_is(c: str) -> bool:
    """Printable: not a C0/C1 control character, DEL, or a Unicode line separator."""
    return " " <= c < "\x7f" or (c > "\x9f" and c not in "\u2028\u2029")


def import_target(target: str, label: str) -> Any:
    """The object at ``target`` (``module:name``); ``InputError`` starting with ``label``
    (``--policy: x``, ``configs/a.yaml: env.reward.function: x``) when the module does not
    import or has no such name."""
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        raise InputError(f"{label}: cannot import {module}: {exc}") from None
    except AttributeError:
        raise InputError(f"{label}: module {module} has no {attr}") from None
