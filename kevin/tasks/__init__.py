"""The tasks layer: the problems every evaluation and training run starts from.

Job: find problems (KernelBench folders, single files, dataset exports, our bundled set), turn them
into `Task` records, select among them, split them into train and holdout sets, validate that a
problem imports, runs and gives an output a checker can trust, and generate fresh fusion tasks.

Public names (re-exported here): `Task`, `Split`, `IdSpec`, `content_hash`, the loaders
(`load_tasks`, `load_source`, `load_file`, `load_directory`, `load_jsonl`, `load_parquet`,
`load_hub`, `load_bundled`, `kernelbench_dir`, `bundled_dir`), selection (`select_tasks`,
`parse_id_spec`, `add_selection_arguments`, `tasks_from_args`) and splits (`split_seeded`,
`split_paper`, `split_from_file`, `save_split`, `split_generated`, `split_by_name`, `read_excluded`,
`exclude_flagged`). Validation is `kevin.tasks.validate` (the parent) and `kevin.tasks.probe` (the
child process); the generator is `kevin.tasks.generate` over the catalogue `kevin.tasks.operators`
(`kevin tasks generate`), deduplicated against KernelBench by `kevin.tasks.dedupe` (forward code read
by `kevin.tasks.kbcode`, and file names); `kevin.tasks.enlarge` writes larger-shape variants of the
KernelBench problems that run too fast (`kevin tasks enlarge`), through `kevin.tasks.sizes` (a
problem's module-level size constants) and `kevin.tasks.scaling` (reference timing, the doubling
loop both share); the commands are `kevin.tasks.commands`.

Modules: `records`, `loaders`, `selection`, `splits`, `validate`, `probe`, `operators`, `generate`,
`kbcode`, `dedupe`, `sizes`, `scaling`, `enlarge`, `commands`; `bundled/`
holds our own problems and their honest candidates (data, not code of this package).

Layer rules: the bottom layer. It imports kevin.errors, the standard library, and torch only in the
validation child and inside the reference timing and sizing (imported there, never at module
load); never kevin.gate, kevin.evaluator, kevin.rl, kevin.train, kevin.search or kevin.cli.
"""

from kevin.tasks.loaders import (
    BUNDLED_SIZES,
    KERNELBENCH_ENV,
    bundled_dir,
    kernelbench_dir,
    level_of_dir,
    load_bundled,
    load_directory,
    load_file,
    load_hub,
    load_jsonl,
    load_parquet,
    load_rows,
    load_source,
    parse_problem_filename,
    read_problem_text,
    with_size,
)
from kevin.tasks.records import IdSpec, Split, Task, content_hash, task_sort_key
from kevin.tasks.selection import (
    add_selection_arguments,
    load_tasks,
    parse_id_spec,
    select_tasks,
    tasks_from_args,
)
from kevin.tasks.splits import (
    PAPER_HOLDOUT_FRACTION,
    exclude_flagged,
    read_excluded,
    save_split,
    split_by_name,
    split_from_file,
    split_generated,
    split_paper,
    split_seeded,
)

__all__ = [
    "BUNDLED_SIZES",
    "KERNELBENCH_ENV",
    "PAPER_HOLDOUT_FRACTION",
    "IdSpec",
    "Split",
    "Task",
    "add_selection_arguments",
    "bundled_dir",
    "content_hash",
    "exclude_flagged",
    "kernelbench_dir",
    "level_of_dir",
    "load_bundled",
    "load_directory",
    "load_file",
    "load_hub",
    "load_jsonl",
    "load_parquet",
    "load_rows",
    "load_source",
    "load_tasks",
    "parse_id_spec",
    "parse_problem_filename",
    "read_excluded",
    "read_problem_text",
    "save_split",
    "select_tasks",
    "split_by_name",
    "split_from_file",
    "split_generated",
    "split_paper",
    "split_seeded",
    "task_sort_key",
    "tasks_from_args",
    "with_size",
]
