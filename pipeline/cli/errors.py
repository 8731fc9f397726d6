"""User errors at a command line's edge: one line on stderr, exit code 2, no traceback.

Every `python -m ...` entry point runs its `main` through `run_cli`. A mistake the user can fix (a
flag out of range, a missing or broken file) is raised deep down as `UserError` or a `ValueError`
whose message names the flag or file and what to do; `run_cli` prints that message as one line.
`--debug` anywhere on the command line re-raises instead, so the traceback is there when the
message is not enough (a `ValueError` from a bug looks like a user error until then). Ctrl-C or
SIGTERM (see `pipeline.tracking.runs.killed_on_interrupt`) ends with one line and exit code 130.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

DEBUG_FLAG = "--debug"
USER_ERROR_EXIT_CODE = 2  # argparse's own code for a bad command line
INTERRUPTED_EXIT_CODE = 130  # the shell's 128 + SIGINT


class UserError(ValueError):
    """A mistake the user can fix; the message names the flag or file and what to do."""


# What counts as the user's mistake at the edge: our own, bad values (ValueError, which covers
# json.JSONDecodeError and the configs' range checks), and paths that are not there.
USER_ERRORS = (UserError, ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError)


def run_cli(main: Callable[[list[str]], int], prog: str, argv: list[str] | None = None) -> int:
    """`main(argv)` with `--debug` taken out; a user error becomes one stderr line and exit code 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in argv
    argv = with_negative_values_attached([arg for arg in argv if arg != DEBUG_FLAG])
    try:
        return main(argv)
    except USER_ERRORS as error:
        if debug:
            raise
        print(
            f"{prog}: error: {one_line(error) or type(error).__name__} ({DEBUG_FLAG} shows the traceback)",
            file=sys.stderr,
        )
        return USER_ERROR_EXIT_CODE
    except OSError as error:
        if debug or not STORE_FAILURE.search(str(error)):
            raise
        print(f"{prog}: error: {store_failure_line(error)} ({DEBUG_FLAG} shows the traceback)", file=sys.stderr)
        return USER_ERROR_EXIT_CODE
    except KeyboardInterrupt as interrupt:
        if debug:
            raise
        print(f"{prog}: interrupted ({one_line(interrupt) or 'Ctrl-C'})", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    except SystemExit as exit_:
        # `raise SystemExit("message")` is how some checks refuse; say it the same way.
        if isinstance(exit_.code, str) and not debug:
            print(f"{prog}: error: {one_line(exit_.code)}", file=sys.stderr)
            return USER_ERROR_EXIT_CODE
        raise


# An object store's failure as pyarrow's filesystems report it (AWS's SDK, curl, an HTTP status): not
# the user's mistake, but not a bug either, and no traceback helps; `store_failure_line` says it.
STORE_FAILURE = re.compile(r"AWS Error|curlCode|HTTP status \d{3}|google::cloud|gcs::")


def store_failure_line(error: OSError) -> str:
    return (
        f"the object store failed a request ({one_line(error)[:300]}); it may be down or overloaded: "
        "run the command again when it answers (finished work is kept), or check the endpoint"
    )


# argparse takes `-1e20` for a flag (its own test for negative numbers knows `-5` and `-.5` only) and
# answers `--budget: expected one argument`, never reaching the value's own check.
NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-inf$", re.IGNORECASE)


def with_negative_values_attached(argv: list[str]) -> list[str]:
    """`--flag -1e20` as `--flag=-1e20`, which argparse reads as the flag's value (none of our flags
    is a negative number), so the value is refused by its own check with a message that says why."""
    out: list[str] = []
    for arg in argv:
        previous = out[-1] if out else ""
        if NEGATIVE_NUMBER.match(arg) and previous.startswith("--") and "=" not in previous:
            out[-1] = f"{previous}={arg}"
        else:
            out.append(arg)
    return out


def one_line(error: BaseException | str) -> str:
    text = str(error)
    if isinstance(error, OSError) and error.filename and str(error.filename) not in text:
        text = f"{text}: {error.filename}"
    return " ".join(text.split())
