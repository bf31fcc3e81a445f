"""Carry a learning run (bench/learning_run.py) from one device session's machine to the next.

A session has 30 minutes of GPU time and its machine forgets /tmp when it goes back; a fresh start
spends ~6 of them on the baseline, SFT and the step-0 evaluation before the first RL step. The
run's work folder crosses instead, within the device's file limits (at most 8 files of 16 MiB each
come back from a call, 64 MiB travel to one):

    pack    the work folder without its weights, plus the RL run's latest checkpoint made slim
            (kevin.train.checkpoint.slim_checkpoint: bf16 weights, no optimiser state), as one
            .tar.gz cut into parts of at most 15 MiB (26.8M parameters: ~50 MB in 4 parts)
    unpack  the parts back into a work folder, and the SFT folder's weights written from the
            checkpoint's (cast to fp32), so that `model.name_or_path` loads; the RL run then
            resumes from the checkpoint (`learning_run.py --resume`)

What does not cross exactly: the weights are rounded to bf16 once and AdamW's moments restart from
zero; step, schedule, task sampler, RNG, the run's logs and the held-out history all continue. The
report counts the carries (`record["carries"]`).

    python3 bench/learning_carry.py pack --work /tmp/kevin-learn --out $OUT/carry
    python3 bench/learning_carry.py unpack --parts .out/carry --work /tmp/kevin-learn
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kevin.errors import UsageError  # noqa: E402

PART_BYTES = 15 * 2**20
PART_PREFIX = "carry.tgz.part"
CARRIED_FILE = "carried.json"
RL_CONFIG_FILE = "config.json"


def _parts(directory: Path) -> list[Path]:
    return sorted(directory.glob(PART_PREFIX + "*"))


def pack(work: Path, dest: Path, *, part_bytes: int = PART_BYTES, attempts: int = 3) -> list[Path]:
    """Write the parts of `work` into `dest` (emptied of older parts first); returns them. The run
    may be going on (a live carry): a checkpoint it deletes while this reads it (the next one is
    saved) makes this start again from the newest."""
    from kevin.train.checkpoint import latest_checkpoint

    for attempt in range(attempts):
        checkpoint = latest_checkpoint(work / "rl")
        if checkpoint is None:
            raise UsageError(f"pack: {work / 'rl'} has no checkpoint to carry; run the RL phase first")
        try:
            return _pack(work, dest, checkpoint, part_bytes)
        except FileNotFoundError:
            if attempt == attempts - 1 or checkpoint.is_dir():
                raise
    raise AssertionError("unreachable")


def _pack(work: Path, dest: Path, checkpoint: Path, part_bytes: int) -> list[Path]:
    from kevin.train.checkpoint import CHECKPOINTS_DIR, LATEST_FILE, slim_checkpoint

    def skip(folder: str, names: list[str]) -> set[str]:
        here = Path(folder)
        dropped = {n for n in names if n.endswith(".safetensors")}  # the SFT start's weights
        if here == work / "rl":
            dropped.add(CHECKPOINTS_DIR)
        return dropped

    dest.mkdir(parents=True, exist_ok=True)
    for old in _parts(dest):
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="kevin-carry-") as tmp:
        staged = Path(tmp) / "work"
        shutil.copytree(work, staged, ignore=skip)
        for log in staged.rglob("*.jsonl"):  # a running run may be half-way through a line
            _drop_partial_line(log)
        checkpoints = staged / "rl" / CHECKPOINTS_DIR
        slim_checkpoint(checkpoint, checkpoints / checkpoint.name)
        (checkpoints / LATEST_FILE).write_text(checkpoint.name + "\n", encoding="utf-8")
        carried = {"checkpoint": checkpoint.name, "work": str(work.resolve())}
        (staged / CARRIED_FILE).write_text(json.dumps(carried) + "\n")
        archive = Path(tmp) / "carry.tgz"
        with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
            tar.add(staged, arcname=".")
        written = []
        with archive.open("rb") as source:
            while chunk := source.read(part_bytes):
                part = dest / f"{PART_PREFIX}{len(written):02d}"
                part.write_bytes(chunk)
                written.append(part)
    return written


def _drop_partial_line(path: Path) -> None:
    """Cut `path` after its last newline: what a reader of a file being appended can find."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])


def unpack(parts_dir: Path, work: Path) -> dict:
    """Restore the work folder from the parts in `parts_dir`; returns what was carried."""
    from kevin.train.checkpoint import MODEL_FILE, latest_checkpoint

    parts = _parts(parts_dir)
    if not parts:
        raise UsageError(f"unpack: no {PART_PREFIX}NN files in {parts_dir}; pass the folder `pack` wrote")
    if work.exists() and any(work.iterdir()):
        raise UsageError(f"unpack: {work} is not empty; unpack into a new folder")
    stream = io.BytesIO(b"".join(part.read_bytes() for part in parts))
    try:
        with tarfile.open(fileobj=stream, mode="r:gz") as tar:
            tar.extractall(work, filter="data")
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise UsageError(
            f"unpack: the {len(parts)} parts in {parts_dir} do not make a whole archive ({exc}); "
            "carry every part the call returned"
        ) from exc
    checkpoint = latest_checkpoint(work / "rl")
    if checkpoint is None:
        raise UsageError(f"unpack: the parts in {parts_dir} hold no checkpoint (an incomplete set?)")
    _write_start_weights(checkpoint / MODEL_FILE, work / "sft")
    carried = json.loads((work / CARRIED_FILE).read_text(encoding="utf-8"))
    _move_paths(work / "rl" / RL_CONFIG_FILE, carried["work"], str(work.resolve()))
    return {**carried, "parts": len(parts), "bytes": sum(p.stat().st_size for p in parts)}


def _move_paths(config_file: Path, old: str, new: str) -> None:
    """The RL run's saved config names files in the old work folder (the SFT start, the family, the
    split); a resume compares it with the new launch's, so it must name the new folder."""

    def moved(value):
        if isinstance(value, dict):
            return {k: moved(v) for k, v in value.items()}
        if isinstance(value, list):
            return [moved(v) for v in value]
        if isinstance(value, str) and (value == old or value.startswith(old + "/")):
            return new + value[len(old) :]
        return value

    config = json.loads(config_file.read_text(encoding="utf-8"))
    config_file.write_text(json.dumps(moved(config), indent=2) + "\n", encoding="utf-8")


def _write_start_weights(model_file: Path, sft_dir: Path) -> None:
    """The SFT folder's safetensors from the checkpoint's weights: the RL run builds its model from
    that folder (config, tokenizer, weights) before the checkpoint overwrites every weight."""
    import torch
    from safetensors.torch import save_file

    state = torch.load(model_file, map_location="cpu", weights_only=True)
    tensors = {k: v.float().clone() if v.is_floating_point() else v.clone() for k, v in state.items()}
    save_file(tensors, str(sft_dir / "model.safetensors"), metadata={"format": "pt"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    packing = verbs.add_parser("pack", help="the work folder into parts")
    packing.add_argument("--work", required=True, type=Path)
    packing.add_argument("--out", required=True, type=Path)
    unpacking = verbs.add_parser("unpack", help="parts back into a work folder")
    unpacking.add_argument("--parts", required=True, type=Path)
    unpacking.add_argument("--work", required=True, type=Path)
    args = parser.parse_args(argv)
    try:
        if args.verb == "pack":
            parts = pack(args.work, args.out)
            print(f"learning_carry: {len(parts)} parts, {sum(p.stat().st_size for p in parts) / 2**20:.1f} MiB")
        else:
            carried = unpack(args.parts, args.work)
            print(f"learning_carry: unpacked {carried['checkpoint']} into {args.work}")
    except UsageError as exc:
        print(f"learning_carry: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
