"""The `slip` bug (kevin.train.kernels.slips): its C and torch forms agree, and a kernel writer makes a
`wrong_slip` variant only where the slip changes what the comparator sees, so the label `wrong` is
never false (s41's scan: softmax is blind to a leading bias, a row's max to relu's floor)."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess

import pytest
import torch

from kevin.train.family import OPS, TaskSpec, c_float
from kevin.train.kernels import variants
from kevin.train.kernels.slips import SLIPS, TORCH_SLIPS, slip_shows, task_output

POINTS = (-3.0, -1.25, -0.3, -0.05, 0.0, 0.07, 0.4, 1.0, 2.5)


def _spec(kind: str, ops: tuple, reduce: str = "", cols: int = 4096) -> TaskSpec:
    return TaskSpec(
        number=1, kind=kind, ops=ops, reduce=reduce, shape=(1024, cols), small_shape=(16, 512), heldout=False
    )


def _slip_names(spec: TaskSpec, backend: str) -> list[str]:
    return [v.name for v in variants(spec, backend) if v.name == "wrong_slip"]


def test_the_torch_slips_compute_what_the_c_slips_do(tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    assert set(SLIPS) == set(TORCH_SLIPS) == set(OPS)
    lines = ["#include <math.h>", "#include <stdio.h>", "int main(void) {", "    float v;"]
    for name in OPS:
        constant = OPS[name].constants[0] if OPS[name].constants else None
        expr = SLIPS[name].format(c=c_float(constant or 0.0), c2=c_float(2 * (constant or 0.0)))
        for point in POINTS:
            lines.append(f"    v = {c_float(point)}; printf(\"%.9g\\n\", (double)({expr}));")
    source = tmp_path / "slips.c"
    source.write_text("\n".join([*lines, "    return 0;", "}", ""]))
    subprocess.run([compiler, "-O0", str(source), "-o", str(tmp_path / "slips"), "-lm"], check=True)
    printed = subprocess.run([str(tmp_path / "slips")], check=True, capture_output=True, text=True).stdout
    from_c = torch.tensor([float(value) for value in printed.split()]).reshape(len(OPS), len(POINTS))
    x = torch.tensor(POINTS)
    for row, name in enumerate(OPS):
        constant = OPS[name].constants[0] if OPS[name].constants else None
        line = TORCH_SLIPS[name].format(x="x", c=repr(constant))
        from_torch = eval(line, {"torch": torch}, {"x": x})  # noqa: S307 - the module's own forms
        assert torch.allclose(from_torch, from_c[row], rtol=1e-5, atol=1e-6), name


def test_a_slip_the_output_cannot_see_makes_no_wrong_variant():
    blind = [
        _spec("softmax", (("bias", 0.5),)),  # softmax(x - c) = softmax(x + c)
        _spec("softmax", (("bias", -0.2), ("scale", 1.5))),  # a shift, then a scale: still a shift
        _spec("rowreduce", (("relu", None),), reduce="max"),  # rows peak far above relu's 0.1 floor
    ]
    for spec in blind:
        assert not slip_shows(spec, True), spec.describe()
        assert _slip_names(spec, "cuda") == [], spec.describe()
        assert _slip_names(dataclasses.replace(spec, shape=spec.small_shape), "cpp") == [], spec.describe()


def test_a_slip_the_output_shows_keeps_its_wrong_variant():
    seen = [
        _spec("softmax", (("leaky", 0.2), ("sigmoid", None))),  # s40's: passed the comparator before
        _spec("act", (("bias", 0.5),)),
        _spec("rowreduce", (("relu", None),), reduce="sum"),
    ]
    for spec in seen:
        assert slip_shows(spec, True) and slip_shows(spec, False), spec.describe()
        assert _slip_names(spec, "cuda") == ["wrong_slip"] and _slip_names(spec, "cpp") == ["wrong_slip"]


def test_the_check_draws_the_inputs_its_problem_draws():
    # A row reduction's problem draws rand + 0.5 randn (rows mostly positive): a sum's row is near
    # cols / 2; the other kinds draw randn.
    total = task_output(_spec("rowreduce", (), reduce="sum", cols=4096), 4096, slip=False)
    assert 1500 < float(total.mean()) < 2600
    plain = task_output(_spec("act", (("scale", 2.0),)), 4096, slip=False)
    assert abs(float(plain.mean())) < 0.05 and 1.8 < float(plain.std()) < 2.2
