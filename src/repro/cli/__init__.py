"""`repro run | notebooks | score | bench | selfcheck`: a module per command (run.py, with family.py for a family's
members), and what running notebooks from a shell needs: preflight, rerun (continue or replace a run), interrupt
(Ctrl-C), measure (selfcheck's and bench's timings), templates/ (selfcheck.md)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Iterator

from ..errors import EXIT_BUSY, Busy, ReproError, ReproWarning, printable
from ..manifest import version_line
from .interrupt import DroppedWhenClosed, say, stop_signal_as_ctrl_c

DESCRIPTION = ("Build, inspect and publish a reward-model-ranked preference dataset, or reproduce a published one, "
               "from parameterized Jupyter notebooks. `repro COMMAND --help` says more of each command.")
PACKAGE = str(Path(__file__).resolve().parents[1])  # repro's own code, whose warnings are shown as one line
# subcommand -> module providing `configure(parser)` and `main(args) -> int`
COMMANDS = {
    "run": ("repro.cli.family", "execute the notebooks a params file lists through papermill (a family: every member)"),
    "notebooks": ("repro.cli.notebooks", "copy the notebooks and example params into a folder to open in JupyterLab"),
    "score": ("repro.cli.score", "score {prompt, candidates} rows (jsonl, parquet) with PairRM or a reward model"),
    "bench": ("repro.cli.bench",
              "time the PairRM engine against llm-blender (a reward model: against padded batches; from a checkout)"),
    "selfcheck": ("repro.cli.selfcheck", "check that PairRM gives llm-blender's numbers on this machine, and how fast"),
}


class _Version(argparse.Action):
    """`--version`, worked out only when asked (it may call git)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only `command`'s module is imported for its options (torch stays off `run` and `--help`)."""
    parser = argparse.ArgumentParser(prog="repro", description=DESCRIPTION)
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="print the version and where it runs from, then exit")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        if name == command:
            importlib.import_module(module).configure(p)
    return parser


@contextlib.contextmanager
def ipython_dir() -> Iterator[None]:
    """Where HOME cannot hold IPython's folder (read-only or none: a container's user), IPYTHONDIR is one folder for
    the command and its kernels, removed after (IPython made, warned of and left one in TMPDIR per start)."""
    try:
        default = Path("~/.ipython").expanduser()
    except RuntimeError:  # no HOME, and a user id of no account (an arbitrary uid in a container)
        default = None
    usable = default if default is None or default.exists() else default.parent  # (as IPython looks, else above)
    if "IPYTHONDIR" in os.environ or usable is not None and usable.is_dir() and os.access(usable, os.W_OK):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="repro-ipython-", ignore_cleanup_errors=True) as folder:
        os.environ["IPYTHONDIR"] = folder
        try:
            yield
        finally:
            del os.environ["IPYTHONDIR"]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if a in COMMANDS), None)
    if isinstance(sys.stdout, io.TextIOWrapper):  # each line as printed, to a log file or pipe too (Slurm, tee)
        sys.stdout.reconfigure(line_buffering=True)
    # SIGTERM, from the first moment, ends the command as Ctrl-C does; a stdout closed early, its lines dropped
    with stop_signal_as_ctrl_c(), ipython_dir(), contextlib.redirect_stdout(DroppedWhenClosed(sys.stdout)) as stdout:
        try:  # (the command's module loads torch and datasets for its options: Ctrl-C may come then too)
            args = build_parser(command).parse_args(argv)
            if os.path.expanduser("~") == "~":  # (the caches, Jupyter's and IPython's folders would be ./~ or raise)
                raise ReproError(f"no home folder (HOME is unset and user {os.getuid()} has no account): set HOME to "
                                 f"a folder you can write, e.g. HOME=$(mktemp -d)")
            with warnings.catch_warnings():  # repro's own warnings as one line each, as its errors (no source line)
                shown = warnings.showwarning
                warnings.showwarning = lambda message, category, filename, *rest: (
                    print(f"repro {command}: warning: {printable(message)}", file=sys.stderr)
                    if issubclass(category, ReproWarning) or str(Path(filename).resolve()).startswith(PACKAGE)
                    else shown(message, category, filename, *rest))
                return int(importlib.import_module(args._module).main(args) or 0)
        except ReproError as exc:
            print(f"repro {command}: error: {printable(exc)}", file=sys.stderr)
            return EXIT_BUSY if isinstance(exc, Busy) else 2
        except KeyboardInterrupt:  # Ctrl-C outside a notebook (a notebook's own is handled by repro run)
            say(f"repro {command}: interrupted; run the same command again to continue.")
            return 130
        finally:
            stdout.flush()  # (what is left, before Python's own flush as it exits)

