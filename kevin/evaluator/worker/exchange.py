"""What the judge and a runner share: a control socket, a shared-memory area, and the cycle flags.

The judge (kevin.evaluator.worker, trusted: it never loads candidate code) and a runner
(kevin.evaluator.worker.runner, the only process that does) talk over

  * a socket pair carrying JSON lines: the judge's commands, the runner's replies. Everything the
    runner sends is untrusted input: `read_reply` caps its size and `Reply` only hands back plain
    values the judge checks before use (shapes against the reference's, byte counts against the
    area's size);
  * a shared-memory file (memfd, passed as a descriptor, never a path another job could open)
    holding a control block and a data area. The runner copies outputs of correctness trials and
    of the timed calls the judge samples into the data area; the judge reads them only after the
    runner has answered, and compares them itself.

The control block's words (int64, native order) drive timed cycles without a system call each way
when both sides spin: the judge writes the call's input seed, then `GO` = call number; the runner
refills its inputs from that seed, runs the call, synchronizes the device and sets `DONE` = call
number; the judge's own clock runs from its write of `GO` to its read of `DONE`. `FETCH` asks the
runner to copy the last call's output into the data area (answered by `FETCHED`, the reply itself
posted in the control block when it fits: a judge blocked on the socket for it paid a wake-up of
0.05-0.15 ms inside the fetch's clock, the noise under `deferred_work`'s false positives). `STOP`
ends the loop. On the CPU back end both sides wait on the socket instead of spinning (a spinning
judge would take one of the cores the candidate is timed on).
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import mmap
import os
import socket
import weakref
from typing import Any

CONTROL_BYTES = 4096
GO, DONE, SEED, FETCH, FETCHED, STOP, MODE, POSTED = range(8)
"""Control-block word indices. POSTED: the length of the reply posted after the words (-1: it went
on the socket)."""
POSTED_OFFSET = 64
"""Where a posted reply starts in the control block; it may fill the rest of it."""
POSTED_BYTES = CONTROL_BYTES - POSTED_OFFSET
MAX_REPLY_BYTES = 1 << 20
"""A runner's reply line longer than this is refused (the judge fails the candidate)."""


class ExchangeError(Exception):
    """The runner broke the protocol (a malformed, oversized or missing reply): the candidate's fault
    once candidate code is loaded in it, ours before."""


def unmap_inherited() -> None:
    """In a runner forked from its judge: unmap every area the judge had mapped (its own runner's
    and any other's), so that nothing of another runner's exchange is in this process's memory; the
    runner maps its own again from the descriptor it was given. The Python objects stay (never
    touched again here)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    for area in list(_MAPPED):
        if libc.munmap(area.base, area.size) != 0:
            raise OSError(ctypes.get_errno(), "munmap of an inherited exchange area")
    _MAPPED.clear()


_MAPPED: weakref.WeakSet[SharedArea] = weakref.WeakSet()
"""Every area this process has mapped (`unmap_inherited`)."""


class SharedArea:
    """A memfd of `CONTROL_BYTES + data_bytes`, mapped here; `fd` is passed to the other side."""

    def __init__(self, data_bytes: int, fd: int | None = None) -> None:
        self.size = CONTROL_BYTES + max(int(data_bytes), 0)
        if fd is None:
            fd = os.memfd_create("kevin-exchange", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, self.size)
            # Its size is fixed for good: a runner that shrank the file would make the judge's next
            # read of its mapping a SIGBUS, killing the judge instead of failing the candidate.
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        self.fd = fd
        self.map = mmap.mmap(fd, self.size)
        _MAPPED.add(self)
        self.words = (ctypes.c_int64 * (CONTROL_BYTES // 8)).from_buffer(self.map)
        self.data_bytes = self.size - CONTROL_BYTES
        self.base = ctypes.addressof(self.words)
        self.pinned_bytes = 0
        """Bytes of the data area page-locked for the GPU in this process (its own mapping)."""

    def pin(self, data_bytes: int) -> bool:
        """Page-lock the first `data_bytes` of the data area for CUDA copies in this process, so
        copies between the device and the area are one DMA at the bus's speed instead of a staged
        copy through pageable memory (a 256 MB output took 220 ms that way on the H200). Grows the
        locked range when asked for more; False when CUDA refuses (copies then stay staged)."""
        import torch

        data_bytes = min(int(data_bytes), self.data_bytes)
        if data_bytes <= self.pinned_bytes:
            return True
        cudart = torch.cuda.cudart()
        if self.pinned_bytes:
            cudart.cudaHostUnregister(self.base)
            self.pinned_bytes = 0
        length = -(-(CONTROL_BYTES + data_bytes) // mmap.PAGESIZE) * mmap.PAGESIZE
        if int(cudart.cudaHostRegister(self.base, min(length, self.size), 0)) != 0:
            return False
        self.pinned_bytes = data_bytes
        return True

    def put(self, offset: int, flat: Any) -> None:
        """Copy a flat uint8 CPU tensor into the data area at `offset`, on this thread alone: torch's
        parallel copy wakes its thread pool, whose scheduling delay on a busy host is milliseconds,
        more than the copy (and the judge times this copy)."""
        import numpy

        target = numpy.frombuffer(
            self.map, dtype=numpy.uint8, count=flat.numel(), offset=CONTROL_BYTES + offset
        )
        target[:] = flat.numpy()

    def take(self, offset: int, nbytes: int) -> Any:
        """A copy of `nbytes` of the data area from `offset`, as a flat uint8 CPU tensor."""
        import numpy
        import torch

        source = numpy.frombuffer(self.map, dtype=numpy.uint8, count=nbytes, offset=CONTROL_BYTES + offset)
        return torch.from_numpy(source.copy())

    def post(self, message: dict[str, Any]) -> bool:
        """(The runner's side, spinning.) `message` written into the control block for a judge that
        spins on the flag set next; False, and POSTED = -1, when it does not fit (it goes on the
        socket then)."""
        data = json.dumps(message).encode()
        if len(data) > POSTED_BYTES:
            self.words[POSTED] = -1
            return False
        self.map[POSTED_OFFSET : POSTED_OFFSET + len(data)] = data
        self.words[POSTED] = len(data)
        return True

    def posted(self) -> dict[str, Any] | None:
        """(The judge's side.) The reply the runner posted, None where it said the socket has it.
        Untrusted like any reply: a length out of range or bytes that are not a JSON object raise
        ExchangeError (read again by the caller until the flag's value matches: on a machine that
        orders stores weakly the words can be seen before the bytes)."""
        length = int(self.words[POSTED])
        if length == -1:
            return None
        if not 0 < length <= POSTED_BYTES:
            raise ExchangeError(f"the runner posted a reply of {length} bytes")
        return parse_reply(bytes(self.map[POSTED_OFFSET : POSTED_OFFSET + length]))

    def data(self) -> Any:
        """The data area as a flat uint8 CPU tensor sharing this mapping."""
        import torch

        return torch.frombuffer(self.map, dtype=torch.uint8, offset=CONTROL_BYTES, count=self.data_bytes)

    def close(self) -> None:
        if self.pinned_bytes:
            import torch

            torch.cuda.cudart().cudaHostUnregister(self.base)
            self.pinned_bytes = 0
        # The ctypes view and any tensor over the map must be gone before the map closes.
        self.words = None
        try:
            self.map.close()
        except BufferError:
            pass  # a view still exists; the mapping goes with the process
        os.close(self.fd)


class Link:
    """One end of the control socket: JSON lines out, JSON lines in (with a size cap).

    `owner_pid` (the runner's end): only that process speaks and listens on it. A fork the candidate
    makes shares the socket, and one that returns through the runner's stack (an exception at
    import, a plain return) would answer the judge in the runner's name and then read its next
    messages: the verdict then hung on which process the judge heard first. Such a copy ends,
    silently, the moment it reaches the link."""

    def __init__(self, sock: socket.socket, owner_pid: int | None = None) -> None:
        self.sock = sock
        self.reader = sock.makefile("rb", buffering=1 << 16)
        self.owner_pid = owner_pid

    def _owned(self) -> None:
        if self.owner_pid is not None and os.getpid() != self.owner_pid:
            os._exit(0)

    def send(self, message: dict[str, Any]) -> None:
        self._owned()
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def receive(self) -> dict[str, Any]:
        self._owned()
        line = self.reader.readline(MAX_REPLY_BYTES + 1)
        if not line:
            raise ExchangeError("the runner closed the connection")
        if len(line) > MAX_REPLY_BYTES:
            raise ExchangeError("the runner sent an oversized message")
        return parse_reply(line)

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def parse_reply(data: bytes) -> dict[str, Any]:
    """One reply of the runner's as a JSON object, or ExchangeError."""
    try:
        message = json.loads(data)
    except ValueError as exc:
        raise ExchangeError(f"the runner sent a malformed message: {exc}") from None
    if not isinstance(message, dict):
        raise ExchangeError("the runner sent something other than an object")
    return message


def tensor_meta(tensor: Any, offset: int) -> dict[str, Any]:
    return {"shape": list(tensor.shape), "dtype": str(tensor.dtype).replace("torch.", ""), "offset": offset}


DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool")


def write_outputs(area: SharedArea, outputs: list[Any], start: int = 0) -> list[dict[str, Any]] | str:
    """Copy tensors into the data area back to back from byte `start` (the runner's side). Returns
    their metadata, or a reason when they do not fit or are not tensors."""
    import torch

    data = area.data()
    offset = start
    metas: list[dict[str, Any]] = []
    for out in outputs:
        if not isinstance(out, torch.Tensor):
            return f"forward returned a {type(out).__name__}, not a tensor"
        flat = out.detach().contiguous().reshape(-1).view(torch.uint8)
        end = offset + flat.numel()
        if end > data.numel():
            return "the outputs are larger than the reference's"
        if flat.is_cuda and area.pin(end):
            data[offset:end].copy_(flat)  # straight from the device into the locked pages
        else:
            area.put(offset, flat.cpu())
        metas.append(tensor_meta(out, offset))
        offset = end
    return metas


def read_outputs(area: SharedArea, metas: Any, expected: list[Any], device: Any = None) -> list[Any] | str:
    """The runner's outputs as tensors (the judge's side), checked against the reference's outputs
    for count, dtype and shape before any byte is read. Returns a reason on mismatch. The tensors are
    copies (the area is reused for the next call), on `device` when it is a CUDA device (copied
    from the locked area straight to it), else on the CPU."""
    import torch

    if not isinstance(metas, list) or len(metas) != len(expected):
        got = len(metas) if isinstance(metas, list) else "no"
        return f"forward returned {got} output(s); the reference returns {len(expected)}"
    data = area.data()
    outputs = []
    for index, (meta, want) in enumerate(zip(metas, expected, strict=True)):
        if not isinstance(meta, dict) or meta.get("dtype") not in DTYPES:
            return f"output {index}: unreadable description"
        shape, offset = meta.get("shape"), meta.get("offset")
        if not (isinstance(shape, list) and all(isinstance(s, int) and s >= 0 for s in shape)):
            return f"output {index}: unreadable shape"
        if list(want.shape) != shape:
            return f"output {index} has shape {tuple(shape)}, the reference's has {tuple(want.shape)}"
        dtype = getattr(torch, meta["dtype"])
        count = 1
        for size in shape:
            count *= size
        nbytes = count * torch.empty((), dtype=dtype).element_size()
        if not isinstance(offset, int) or offset < 0 or offset + nbytes > data.numel():
            return f"output {index}: outside the shared area"
        if device is not None and torch.device(device).type == "cuda" and area.pin(offset + nbytes):
            raw = torch.empty(nbytes, dtype=torch.uint8, device=device)
            raw.copy_(data[offset : offset + nbytes])
        else:
            raw = area.take(offset, nbytes)
        outputs.append(raw.view(dtype).reshape(shape))
    return outputs


def output_bytes(outputs: list[Any]) -> int:
    import torch

    return sum(o.numel() * o.element_size() for o in outputs if isinstance(o, torch.Tensor))


ALIGN = 4096


def shared_inputs(area: SharedArea, inputs: list[Any]) -> tuple[list[Any], list[Any], int]:
    """Lay `inputs` out at the start of the data area (the judge's side, CPU back end): returns the
    description a runner turns into views (`input_views`), the judge's own views, and the first
    byte after them (page-aligned) where outputs may go. Non-tensor inputs travel as values."""
    import torch

    data = area.data()
    offset = 0
    described: list[Any] = []
    views: list[Any] = []
    for value in inputs:
        if not isinstance(value, torch.Tensor):
            described.append({"value": value})
            views.append(value)
            continue
        nbytes = value.numel() * value.element_size()
        if offset + nbytes > data.numel():
            raise ValueError("the inputs do not fit in the shared area")
        view = data[offset : offset + nbytes].view(value.dtype).reshape(value.shape)
        view.copy_(value)
        described.append(tensor_meta(value, offset))
        views.append(view)
        offset += -(-nbytes // ALIGN) * ALIGN
    return described, views, offset


def input_views(area: SharedArea, described: Any) -> list[Any]:
    """The runner's views of inputs the judge laid out with `shared_inputs`."""
    import torch

    data = area.data()
    views: list[Any] = []
    for item in described:
        if "value" in item:
            views.append(item["value"])
            continue
        dtype = getattr(torch, item["dtype"])
        count = 1
        for size in item["shape"]:
            count *= size
        nbytes = count * torch.empty((), dtype=dtype).element_size()
        views.append(data[item["offset"] : item["offset"] + nbytes].view(dtype).reshape(item["shape"]))
    return views
