"""The messages that cross the process boundary between an EngineCore client and its child.

Every message is a msgspec Struct encoded with msgpack; the two directions are tagged unions,
so a receiver decodes any message of its direction with one typed decoder. No pickle on the wire.

parent -> EngineCore child (stdin):    Launch
client -> EngineCore (input socket):  AddRequest | AbortRequests | Control | Shutdown
EngineCore -> client (output socket): Ready | StartupFailed | Outputs | ControlReply | EngineFailed
EngineCore -> subscribers (PUB):      StepEvent (core/engine/events.py, untagged)
"""

from typing import NamedTuple

import msgspec

from enginetui.core.config import EngineConfig
from enginetui.core.engine.control import ControlError
from enginetui.core.engine.engine_info import EngineInfo
from enginetui.core.engine.events import StepEvent
from enginetui.core.outputs import EngineCoreOutputs, EngineCoreRequest


class EngineAddresses(NamedTuple):
    """The three sockets between a client and its EngineCore (ipc:// paths)."""

    input: str  # client PUSH (bound) -> EngineCore PULL: AddRequest / AbortRequests / Control / Shutdown
    output: str  # EngineCore PUSH -> client PULL (bound): Ready / Outputs / ControlReply / ...
    events: str  # EngineCore XPUB (bound) -> any number of SUB: StepEvent


# ---- parent -> child ------------------------------------------------------------------------


class Launch(msgspec.Struct):
    """Everything an EngineCore child needs, written to its stdin by the parent."""

    config: EngineConfig  # the engine to build
    addresses: tuple[str, str, str]  # input, output and event socket addresses (ipc://)
    parent_pid: int  # exit as soon as this process is gone
    set_pdeathsig: bool  # ask the kernel to SIGTERM us when the parent thread exits (main-thread parents only)
    log_file: str | None  # append all output there (None: inherit the parent's stdout / stderr)


# ---- client -> EngineCore -------------------------------------------------------------------


class AddRequest(msgspec.Struct, tag="add"):
    """Queue a preprocessed request in the scheduler."""

    request: EngineCoreRequest  # the validated request


class AbortRequests(msgspec.Struct, tag="abort"):
    """End these requests (unknown or finished ids are ignored)."""

    request_ids: list[str]  # requests to abort


class Control(msgspec.Struct, tag="control"):
    """A control call; EngineCore answers every one with a ControlReply carrying the same call_id."""

    call_id: int  # matches the reply to the call
    op: str  # a name in core.engine.control.OPS
    value: float | None = None  # the op's value: seconds for set_step_interval, None for the others


class Shutdown(msgspec.Struct, tag="shutdown"):
    """Leave the busy loop and exit."""


InputMessage = AddRequest | AbortRequests | Control | Shutdown

# ---- EngineCore -> client -------------------------------------------------------------------


class Ready(msgspec.Struct, tag="ready"):
    """Handshake: EngineCore is built and serving."""

    info: EngineInfo  # limits and identity of the engine (pid is the child's)


class StartupFailed(msgspec.Struct, tag="startup_failed"):
    """Handshake: building EngineCore raised; the child exits after sending this."""

    error: str  # "ExceptionType: message"


class Outputs(msgspec.Struct, tag="outputs"):
    """What one step (or an abort while paused) produced."""

    outputs: EngineCoreOutputs  # per-request progress


class ControlReply(msgspec.Struct, tag="control_reply"):
    """The answer to a Control call; sent after any outputs the call produced."""

    call_id: int  # the call answered
    step: int  # EngineCore's step counter after the call
    error: ControlError | None = None  # why the call failed (None: it succeeded)
    result: StepEvent | bool | None = None  # what the op returned (snapshot: the state; reset_prefix_cache: done?)


class EngineFailed(msgspec.Struct, tag="engine_failed"):
    """A step raised: EngineCore is broken and exits after sending this."""

    error: str  # "ExceptionType: message"


OutputMessage = Ready | StartupFailed | Outputs | ControlReply | EngineFailed


def encode(msg: msgspec.Struct) -> bytes:
    return _ENCODER.encode(msg)


def decode_input(data: bytes) -> InputMessage:
    return _INPUT_DECODER.decode(data)


def decode_output(data: bytes) -> OutputMessage:
    return _OUTPUT_DECODER.decode(data)


def decode_launch(data: bytes) -> Launch:
    return msgspec.msgpack.decode(data, type=Launch)


def describe(exc: BaseException) -> str:
    """An exception as one line for the wire: 'Type: message'."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_ENCODER = msgspec.msgpack.Encoder()
_INPUT_DECODER = msgspec.msgpack.Decoder(InputMessage)
_OUTPUT_DECODER = msgspec.msgpack.Decoder(OutputMessage)
