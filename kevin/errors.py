"""Exceptions that carry a meaning to the CLI.

A bad candidate is never an exception (it is an `EvalResult`); these are for the user's input and
for our own infrastructure.
"""


class UsageError(Exception):
    """Bad usage or input from the person running kevin: the CLI prints it on one line, exit 2.

    The message says what is wrong and how to fix it.
    """


class InfrastructureError(Exception):
    """Our side failed (a worker would not start, a reference problem crashed): never the model's fault."""
