"""Errors that the command line turns into exit status 2 and one line on stderr."""

from __future__ import annotations


class InputError(Exception):
    """Bad input from a user: a config key, a trace row, a checkpoint, an argument.

    The message is one line that names where the problem is and what it is, for
    example ``trace.csv:3: duration: must be > 0, got -7`` or
    ``configs/x.yaml: topology.racks_per_subcluster: must be >= 1, got 0``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message.replace("\n", " "))
