"""The foundation every ``pragma`` command stands on: consoles, the user-error type, ``--set``
parsing, reading problems and candidates, exit codes and signal handling.

``pragma`` (graph/cli.py), ``pragma eval`` (eval/cli.py) and ``pragma knowledge``
(knowledge/cli.py) import this module and nothing from each other, so the command modules form a
tree (graph/cli.py mounts the other two) and no import is deferred to dodge a cycle. Imports that
stay inside functions here are heavy ones (torch, LangChain) kept off ``pragma --help``'s path.

Exit codes, the same for every command: 0 success, 1 the work ran and failed (no correct kernel, a
check that did not pass), 2 bad invocation or unusable input (one line, never a traceback), 130
Ctrl-C and 143 SIGTERM (the run is checkpointed and marked stopped; resume it).
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from pragma.graph.context import Context, coerce_setting, field_descriptions, resolve_context

EXIT_OK = 0  # success (a correct kernel, a finished command)
EXIT_FAILED = 1  # the work ran and failed (no correct kernel, a check that did not pass)
EXIT_USAGE = 2  # bad invocation or unusable input: one line, never a traceback
EXIT_INTERRUPTED = 130  # Ctrl-C: the run is checkpointed and marked stopped
EXIT_TERMINATED = 143  # SIGTERM: the same as Ctrl-C

# markup=False: messages carry brackets (compiler output, pip extras) that rich would eat.
console = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)  # errors, progress of sub-apps
out = Console(highlight=False, soft_wrap=True, markup=False)  # results
log = logging.getLogger("pragma")

SETTINGS_HELP = "Run setting KEY=VALUE (repeatable), any field of Context, e.g. --set timed_calls=50."


class UserError(Exception):
    """A mistake in the invocation or input: reported on one line, exit code 2."""


def settings(pairs: list[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` pairs as typed Context values (one-line UserError otherwise)."""
    known = field_descriptions()
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in known:
            raise UserError(f"--set expects KEY=VALUE with KEY one of: {', '.join(known)}")
        try:
            values[key] = coerce_setting(key, raw)
        except ValueError:
            raise UserError(f"--set {key}: {raw!r} is not a valid {type(getattr(Context(), key)).__name__}") from None
    return values


def context(pairs: list[str], **explicit: Any) -> Context:
    """The run's Context from environment, ``--set`` pairs and explicit options (these win)."""
    try:
        ctx = resolve_context(**{**settings(pairs), **{k: v for k, v in explicit.items() if v is not None}})
    except ValueError as exc:
        raise UserError(str(exc)) from None
    from pragma.tools.backends import require  # heavy (torch)

    require(ctx)  # backend=gpu without CUDA (and without TRITON_INTERPRET=1): one line, exit 2
    return ctx


def read_candidate(path: Path) -> str:
    if not path.is_file():
        raise UserError(f"candidate file not found: {path}")
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read candidate {path}: {exc}") from None


def read_problem(path: Path) -> dict[str, Any]:
    from pragma.tools.problem import ProblemError  # heavy (torch)
    from pragma.tools.problem import read_problem as _read

    try:
        return _read(path)
    except ProblemError as exc:
        raise UserError(str(exc)) from None


_signals: list[int] = []  # signals received, for the exit code and message


def _on_sigterm(signum: int, frame: object) -> None:
    # Raised where the main thread is, so a run is checkpointed and marked stopped exactly as on
    # Ctrl-C; the default action would end the process without a word.
    _signals.append(signum)
    raise KeyboardInterrupt()


def _stopped() -> None:
    terminated = signal.SIGTERM in _signals
    console.print(f"{'terminated' if terminated else 'interrupted'} (pragma runs lists the thread ids to resume)")
    sys.exit(EXIT_TERMINATED if terminated else EXIT_INTERRUPTED)


def _click_types() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """(usage-error classes, abort classes) of click and of the click copy typer vendors
    (``typer._click`` since typer 0.2x): typer raises its own, which click's classes do not match."""
    import click

    usage: list[type] = [click.exceptions.ClickException]
    aborts: list[type] = [click.exceptions.Abort]
    try:
        from typer._click import exceptions as vendored  # type: ignore[import-not-found]

        usage.append(vendored.ClickException)
    except ImportError:
        pass
    if isinstance(getattr(typer, "Abort", None), type):
        aborts.append(typer.Abort)
    return tuple(usage), tuple(aborts)


def run(app: Callable[..., Any]) -> None:
    """Run a typer app as a command: every user mistake becomes one line and exit 2, Ctrl-C and
    SIGTERM stop the run resumably (130/143), anything else is a bug and keeps its traceback."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # The error types of the layers below, imported here (not at the top) because they pull in
    # LangChain and torch, which `pragma --help` does not need; with no collection while they load.
    from pragma.tools.launch import startup

    with startup.imports():
        from pragma.graph.lock import RunLocked
        from pragma.nodes.llm import LLMError, describe_error
        from pragma.tools.backends import BackendUnavailable
        from pragma.tools.problem import ProblemError

    try:
        # Outside standalone mode click returns a command's exit code instead of exiting, and
        # typer returns 130 for a KeyboardInterrupt.
        code = app(standalone_mode=False) or 0
        if code == EXIT_INTERRUPTED or _signals:
            _stopped()
        sys.exit(code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (UserError, ProblemError, LLMError, BackendUnavailable, RunLocked) as exc:
        console.print(f"error: {exc}")
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        _stopped()
    except Exception as exc:  # click usage errors and the like
        usage_errors, aborts = _click_types()
        if isinstance(exc, usage_errors):
            # One line, like every other user mistake (click's own show() prints usage blocks).
            command = getattr(getattr(exc, "ctx", None), "command_path", "") or "pragma"
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            console.print(f"error: {message} (see {command} --help)")
            sys.exit(EXIT_USAGE)
        if isinstance(exc, aborts):
            _stopped()
        if line := describe_error(exc):  # an LLM endpoint failure that outlived the retries
            console.print(f"error: {line}")
            sys.exit(EXIT_USAGE)
        raise
