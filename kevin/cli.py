"""The `kevin` command: one entry point, one subcommand per job (the top layer: it may import any).

Each concept module that offers commands defines `register_commands(subparsers)`, which adds its
parsers and sets `run=handler` on them; `handler(args) -> int`. Exit codes (DESIGN.md §2): 0 done
(whatever the verdict), 1 rejected where a verdict is the point (`check`), 2 bad usage or input,
printed as one line that says how to fix it.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from kevin import __version__
from kevin.errors import UsageError

# Modules that contribute subcommands, in the order `kevin --help` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "kevin.tasks.commands",
    "kevin.gate.check",
    "kevin.evaluator.commands",
    "kevin.evaluator.batch",
    "kevin.evaluator.profiling.commands",
    "kevin.rl.metrics",
    "kevin.train.family",
    "kevin.train.sft",
    "kevin.train.cli",
    "kevin.search.commands",
)


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage already; make the message one line that names the fix."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kevin",
        description="Train and use language models that write fast, correct GPU kernels (multi-turn RL).",
    )
    parser.add_argument("--version", action="version", version=f"kevin {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register_commands(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help and --version end parsing with exit code 0
            return int(exc.code or 0)
        if getattr(args, "run", None) is None:
            parser.print_help(sys.stderr)
            return 2
        return int(args.run(args))
    except UsageError as exc:
        print(f"kevin: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kevin: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
