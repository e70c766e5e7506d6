"""The wire between the judge and its runners: typed messages over a ``SOCK_SEQPACKET`` socketpair.

Neutral ground: both sides import this module (standard library only, no torch), nothing in it
runs candidate code or decides anything.

Direction matters:
- judge -> runner: a JSON header, optionally with file descriptors (``memfd`` regions of shared
  memory) and a pickled payload (init inputs, non-tensor inputs). Pickle flows only from the judge
  to the runner: the runner trusts the judge, never the other way round.
- runner -> judge: a JSON object of at most ``MAX_REPLY_BYTES``, no descriptors, never pickle. The
  judge treats every field as untrusted (a candidate owns the runner's process and can send
  anything): it reads only the fields it needs, checks their types and bounds, and takes tensor
  data only from shared memory it owns, by offsets it validates.

SEQPACKET keeps message boundaries, so one ``recv`` is one message (no framing to get wrong).
"""

from __future__ import annotations

import array
import json
import os
import pickle
import socket
from typing import Any, Literal, NotRequired, TypedDict

MAX_REPLY_BYTES = 1 << 16  # runner -> judge; a longer reply is a protocol violation
MAX_FDS = 4


class TensorSpec(TypedDict):
    """Where one tensor lies in a shared-memory region (judge -> runner for inputs, runner -> judge
    for outputs; the judge validates every field of the latter against the region's size)."""

    index: int  # position in the argument / output list
    offset: int  # byte offset of element 0 in the region (64-byte aligned)
    shape: list[int]  # sizes
    stride: list[int]  # strides in elements
    dtype: str  # torch dtype name without "torch.", e.g. "float32"
    nbytes: int  # bytes spanned from offset (storage extent of the strided view)


class LoadRequest(TypedDict):
    """Judge -> runner: import a module and construct its class (payload: pickled init inputs)."""

    op: Literal["load"]
    path: str  # the problem file (reference) or candidate.py / best.py in the private dir
    module_name: str  # sys.modules name: pragma_problem / pragma_candidate / pragma_best
    class_name: str  # "Model" or "ModelNew"
    import_seed: int  # torch.manual_seed before the import (random, unrelated to input seeds)
    construct_seed: int  # torch.manual_seed before the constructor (same for reference and candidates)
    problem_path: str  # lets the candidate's runner tell whether it contains the reference Model
    device: str  # "cpu" or "cuda"
    num_threads: int  # torch.set_num_threads in the runner


class BindRequest(TypedDict):
    """Judge -> runner: map an input region (the descriptor travels with it; payload: non-tensor inputs)."""

    op: Literal["bind"]
    size_bytes: int  # the region's size (a memfd)
    specs: list[TensorSpec]  # where each tensor input lies in the region
    read_only: NotRequired[bool]  # the timed rounds' region, sealed and shared by every runner


class CallReply(TypedDict, total=False):
    """Runner -> judge after ``call`` (advisory: computed in the candidate's own process)."""

    ok: bool  # forward returned without raising
    error: str  # exception text when not ok (truncated)
    kind: str  # "runtime_error" or "memory" when not ok
    compiled_calls: int  # calls into the candidate's compiled code during the call (when counting)
    compute_ops: list[str]  # aten compute ops dispatched (when recording)
    downcasts: list[str]  # fp32 -> fp16/bf16 conversions dispatched (when recording)
    form: str  # why an output is not a plain dense tensor ("" when fine)
    overlap: str  # which memory an output shares ("" when none)
    out: list[Any]  # per output: {ptr, shape, stride, dtype} of a host tensor, else None (the judge
    # reads the bytes there itself, tools/judging/peek.py; the report needs no trust)


class OutputReply(TypedDict, total=False):
    """Runner -> judge after ``fetch``: the last outputs were copied into the output region."""

    ok: bool  # outputs copied
    outputs: list[TensorSpec]  # one per output tensor, in order
    kinds: list[str]  # "tensor" or the Python type name of each output
    devices: list[str]  # device of each output before the copy ("cpu", "cuda:0")
    need_bytes: int  # set (with ok false) when the output region is too small
    error: str  # why the copy failed


def send(sock: socket.socket, header: dict[str, Any], fds: list[int] | None = None, payload: Any = None) -> None:
    """Judge -> runner (or a small runner reply when ``fds`` and ``payload`` are None)."""
    body: dict[str, Any] = {"h": header}
    if payload is not None:
        body["p"] = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL).hex()
    data = json.dumps(body).encode()
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.sendall(data)


def recv_command(sock: socket.socket, max_bytes: int = 1 << 26) -> tuple[dict[str, Any], list[int], Any]:
    """Runner side: (header, fds, payload) from the judge. EOFError when the judge is gone."""
    data, fds, flags, _ = socket.recv_fds(sock, max_bytes, MAX_FDS)
    if not data:
        raise EOFError("judge closed the connection")
    body = json.loads(data)
    payload = pickle.loads(bytes.fromhex(body["p"])) if "p" in body else None
    return body["h"], list(fds), payload


def reply(sock: socket.socket, message: dict[str, Any]) -> None:
    """Runner side: a small JSON reply (over-long replies are cut by the judge anyway)."""
    sock.sendall(json.dumps({"h": message}).encode()[:MAX_REPLY_BYTES])


class ProtocolError(RuntimeError):
    """The runner sent something that is not a well-formed reply."""


def recv_reply(sock: socket.socket) -> dict[str, Any]:
    """Judge side: one reply, as a dict of JSON values. EOFError when the runner died."""
    data, ancdata, flags, _ = sock.recvmsg(MAX_REPLY_BYTES + 1, socket.CMSG_SPACE(MAX_FDS * 4))
    for level, kind, raw in ancdata:  # a runner must not hand us descriptors: close any it sent
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds = array.array("i")
            fds.frombytes(raw[: len(raw) - len(raw) % fds.itemsize])
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
            raise ProtocolError("runner sent file descriptors")
    if not data:
        raise EOFError("runner closed the connection")
    if len(data) > MAX_REPLY_BYTES or flags & socket.MSG_TRUNC:
        raise ProtocolError(f"runner reply longer than {MAX_REPLY_BYTES} bytes")
    try:
        body = json.loads(data)
    except ValueError as exc:
        raise ProtocolError(f"runner reply is not JSON: {exc}") from None
    if not isinstance(body, dict) or not isinstance(body.get("h"), dict):
        raise ProtocolError("runner reply is not an object")
    return body["h"]
