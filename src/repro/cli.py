"""`repro run | score | bench`: a thin command line over the package (no logic of its own)."""

from __future__ import annotations

import argparse
import importlib
import sys

from .errors import ReproError

# subcommand -> module providing `configure(parser)` and `main(args) -> int`
COMMANDS = {
    "run": ("repro.runner", "execute the notebooks a params file lists, through papermill"),
    "score": ("repro.score_cmd", "score {prompt, candidates} rows of a jsonl file with PairRM or a reward model"),
    "bench": ("repro.bench", "time the PairRM engine against llm-blender (or a reward model against padded batches)"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="repro", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        try:
            importlib.import_module(module).configure(p)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            p.set_defaults(_missing=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_missing", False):
        parser.error(f"'{args.command}' is not available in this installation")
    try:
        return int(importlib.import_module(args._module).main(args) or 0)
    except ReproError as exc:
        print(f"repro {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
