"""The evaluation harness's user error, in a module of its own so the harness and its Ray
back end (``scale.py``, which the harness imports for ``--ray``) both raise it without importing
each other. ``harness.HarnessError`` is the same class."""


class HarnessError(ValueError):
    """Bad input to the harness (unknown run, bad mode): one line, the CLI exits 2."""
