"""The one exception type users see: a paragraph that names the parameter or row and says what to do."""

import contextlib
import difflib
import json
import os
import re
import sys
import traceback
import unicodedata
import warnings
from typing import Any, Iterable, Iterator, Mapping

NOTICE = "repro: "  # the start of what the package says on stderr beside its work (`repro run` repeats it)
PACKAGE_DIR = os.path.dirname(__file__) + os.sep


def notice(text: str) -> None:
    """Say `text` on stderr, as the package's own: a notebook shows it, and `repro run` repeats it on the terminal."""
    print(NOTICE + text, file=sys.stderr, flush=True)


class ReproWarning(RuntimeWarning):
    """What repro warns of (rows cut, lower batch_tokens); commands tell it by type: it points at the caller's line."""


def warn(message: str) -> None:
    """Warn of `message` at the user's line that called repro, however deep (as Python 3.12's skip_file_prefixes)."""
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and frame.f_code.co_filename.startswith(PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, ReproWarning, stacklevel=level)


def did_you_mean(name: str, options: Iterable[str], shown: Mapping[str, str] | None = None) -> str:
    """" Did you mean 'x'?" (or "'x' or 'y'", as near) for a misspelt name, else ""; `shown`: how to write an option."""
    options, shown = list(options), shown or {}
    near = {c: difflib.SequenceMatcher(None, c, name).ratio() for c in difflib.get_close_matches(name, options)}
    best = [repr(shown.get(c, c)) for c in options if c in near and near[c] == max(near.values())]  # options' order
    return f" Did you mean {' or '.join(best)}?" if best else ""


class ReproError(Exception):
    """A user-facing error: the message names what is wrong (parameter, row, file) and how to fix it."""

    def _render_traceback_(self) -> list[str]:
        """IPython's hook: a notebook cell shows the paragraph, without the stack (the cell still fails)."""
        return [f"\x1b[0;31m{type(self).__name__}\x1b[0m: {self}"]


@contextlib.contextmanager
def rendering(whose: str, advice: str) -> Iterator[None]:
    """A template error of `whose` (compiling or rendering) raised again as a ReproError naming template, line and
    error, then `advice`, from None: IPython, tracing through a template's frames, reads the .jinja as Python, fails,
    and the cell says nothing (`repro run`: "CellExecutionError: ")."""
    try:
        yield
    except ReproError:  # (a paragraph already, which IPython shows without the stack)
        raise
    except Exception as exc:
        # the innermost template's line (a syntax error's too: jinja gives it a frame of its template); a macro called
        # from Python raises from its template's compiled code, whose line jinja maps to the template's
        where = [f"template {os.path.basename(frame.f_code.co_filename)}, line "
                 f"{t.get_corresponding_lineno(line) if (t := frame.f_globals.get('__jinja_template__')) else line}"
                 for frame, line in traceback.walk_tb(exc.__traceback__) if frame.f_code.co_filename.endswith(".jinja")]
        said = str(exc).rstrip(".")  # (its own full stop once)
        raise ReproError(f"{whose} {where[-1] if where else 'templates'}: {type(exc).__name__}: {said}. {advice}") \
            from None


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or Interrupt Kernel during a stage: a notebook cell shows the one line (what is kept, how to go on)."""

    _render_traceback_ = ReproError._render_traceback_


EXIT_BUSY = 75  # the exit status of a command another process's work kept from its folder (EX_TEMPFAIL: try later)


class Busy(ReproError):
    """Another process writes in the command's folder; the command goes on once it ends; `repro` exits EXIT_BUSY."""


class ParameterError(ReproError, ValueError):
    """A parameter is unknown, missing or of the wrong type or value."""


class Refused(ParameterError):
    """A notebook cell refused before it did anything: the notebook's objects stay usable, so its advice works."""


class DataError(ReproError, ValueError):
    """Input data (a row, a column, a file) is not what the stage needs."""


class ModelLoadError(ReproError, OSError):
    """A model could not be found or loaded (local path, hub cache, offline hub)."""


class DatasetLoadError(ReproError, OSError):
    """A dataset could not be found or downloaded (hub id unknown, offline hub); not a problem of its rows."""


def printable(text: Any) -> str:
    """`text` with control characters (C0 but tab, newline; DEL, C1) escaped (\\x1b): printed, none moves the cursor."""
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", lambda c: ascii(c[0])[1:-1], str(text))


def counted(n: int, noun: str) -> str:
    """'1 row', '2 rows' (`noun` in the singular, made plural with an s)."""
    return f"{n} {noun}{'s' * (n != 1)}"


def unicode_form(text: str) -> str:
    """'NFD' (é as e and a combining accent, as macOS names files), 'NFC' (é one character, as typed), or 'mixed'."""
    return next((f for f in ("NFD", "NFC") if unicodedata.is_normalized(f, text)), "mixed")


def listed(changed: dict[str, tuple[Any, Any]]) -> str:
    """Changed parameters as the refusals name them: "limit (null there, 8 now), ..."."""
    def shown(value: Any) -> str:  # as a params file writes it: a mapping or list as JSON, null, true, false
        return json.dumps(value, default=str) if isinstance(value, (dict, list, bool)) or value is None else repr(value)

    def pair(old: Any, new: Any) -> str:  # two spellings of a name (é: e and an accent, NFD, or one letter) look alike
        if isinstance(old, str) and isinstance(new, str) and unicodedata.normalize("NFC", old) == \
                unicodedata.normalize("NFC", new):
            return (f"{ascii(old)} there, {ascii(new)} now: the same name in another Unicode form, "
                    f"{unicode_form(old)} there, {unicode_form(new)} now")
        return f"{shown(old)} there, {shown(new)} now"

    return ", ".join(f"{key} ({pair(old, new)})" for key, (old, new) in changed.items())
