"""`kevin tasks list|show|validate|generate|enlarge`: the task layer's commands."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from kevin.errors import UsageError
from kevin.tasks import enlarge, generate, validate
from kevin.tasks.loaders import BUNDLED_SIZES, load_source
from kevin.tasks.records import Task
from kevin.tasks.selection import add_selection_arguments, tasks_from_args


def format_task_table(tasks: Sequence[Task]) -> str:
    """One aligned row per task: id, level, name, hash."""
    rows = [("id", "level", "name", "hash")] + [(t.id, str(t.level), t.name, t.hash) for t in tasks]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}" for r in rows)


def _run_list(args) -> int:
    tasks = tasks_from_args(args)
    print(format_task_table(tasks))
    print(f"{len(tasks)} task(s)")
    return 0


def _run_show(args) -> int:
    everything = load_source(args.source, size=args.size)
    match = next((t for t in everything if t.id.lower() == args.task_id.lower()), None)
    if match is None:
        where = args.source or "bundled tasks"
        raise UsageError(f"no task {args.task_id!r} in {where}; run 'kevin tasks list' to see the ids")
    for field in ("id", "level", "problem", "name", "hash", "origin"):
        print(f"# {field}: {getattr(match, field)}")
    print(match.source if match.source.endswith("\n") else match.source + "\n", end="")
    return 0


def _run_help(parser):
    def run(args) -> int:
        parser.print_help(sys.stderr)
        return 2

    return run


def register_commands(subparsers) -> None:
    """Add `kevin tasks list|show|validate|generate|enlarge`."""
    tasks_parser = subparsers.add_parser(
        "tasks",
        help="list, show, validate, generate and enlarge problems",
        description="List, show, validate, generate and enlarge problems (tasks).",
    )
    tasks_parser.set_defaults(run=_run_help(tasks_parser))
    commands = tasks_parser.add_subparsers(dest="tasks_command", metavar="COMMAND")

    list_parser = commands.add_parser(
        "list",
        help="one row per task: id, level, name, hash",
        description="List tasks: id, level, name, content hash.",
    )
    add_selection_arguments(list_parser)
    list_parser.set_defaults(run=_run_list)

    show_parser = commands.add_parser(
        "show",
        help="print one task's metadata and source",
        description="Print one task's metadata and its source.",
    )
    show_parser.add_argument("task_id", metavar="ID", help="task id as 'kevin tasks list' prints it")
    show_parser.add_argument("--source", default=None, help="where to look (default: bundled)")
    show_parser.add_argument(
        "--size", default="small", choices=BUNDLED_SIZES, help="input size of bundled tasks (default: small)"
    )
    show_parser.set_defaults(run=_run_show)

    validate.add_parser(commands)
    generate.add_parser(commands)
    enlarge.add_parser(commands)
