"""What a crafted file holds in the security tests."""

from __future__ import annotations


class Payload:
    """Unpickling this creates ``marker``: what a crafted checkpoint would do."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


class ReachedRay(Exception):
    """A command got past every check and would start Ray (then unpickle)."""
