"""The command lines' argument parser: ``argparse`` with one-line errors.

Every ``python -m ...`` entry point of the toolkit parses its flags with :class:`Parser`, so
a malformed flag (``--n 1e3`` for an integer) is one line on stderr and exit 2, like every
other bad input, instead of argparse's usage block followed by the error."""

from __future__ import annotations

import argparse

__all__ = ["Parser"]


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are ``error: MESSAGE (see PROG --help)``
    on one line, exit status 2."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")
