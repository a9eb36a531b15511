"""Why bytes are not a valid message, in words that name the field.

protobuf's parser only says *that* a message did not parse; some releases add why, others
(protobuf 6's upb) just "Error parsing message with type …". Walking the wire format against
the message's descriptor finds the first field at fault, so a client hears
"field 'inputs[0].name' is not valid UTF-8" whichever protobuf is installed.
"""

from __future__ import annotations

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError

from conveyor.protocol.grpc.wire import _read_varint

_VARINT, _FIXED64, _LENGTH_DELIMITED, _GROUP_START, _GROUP_END, _FIXED32 = range(6)
_FIXED_SIZE = {_FIXED64: 8, _FIXED32: 4}


def why_unparseable(descriptor: Descriptor, data: bytes | memoryview) -> str | None:
    """The first problem in ``data`` read as a ``descriptor`` message, or None if none found."""
    try:
        return _walk(descriptor, bytes(data), "")  # the error path only: a copy is fine
    except DecodeError as exc:
        return str(exc)


def _walk(descriptor: Descriptor, data: bytes, path: str) -> str | None:
    position, counts = 0, dict[int, int]()
    while position < len(data):
        key, position = _read_varint(data, position)
        number, kind = key >> 3, key & 7
        field = descriptor.fields_by_number.get(number)
        name = path + (field.name if field else f"#{number}")
        if field is not None and _is_repeated(field):
            name += f"[{counts.get(number, 0)}]"
            counts[number] = counts.get(number, 0) + 1
        if number == 0:
            return f"field number 0 at byte {position} (not a protobuf message)"
        if kind == _VARINT:
            _, position = _read_varint(data, position)
        elif kind in _FIXED_SIZE:
            position += _FIXED_SIZE[kind]
            if position > len(data):
                return f"field {name!r} runs past the end of the message"
        elif kind == _LENGTH_DELIMITED:
            size, position = _read_varint(data, position)
            if position + size > len(data):
                return f"field {name!r} runs past the end of the message"
            value, position = data[position : position + size], position + size
            problem = _check_value(field, value, name)
            if problem:
                return problem
        else:
            return f"field {name!r} uses wire type {kind}, which this message does not use"
    return None


def _check_value(field: FieldDescriptor | None, value: bytes, name: str) -> str | None:
    if field is None:
        return None  # an unknown field: protobuf keeps it, so it is not the problem
    if field.type == FieldDescriptor.TYPE_STRING:
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            return f"field {name!r} is not valid UTF-8"
    elif field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type is not None:
        return _walk(field.message_type, value, name + ".")
    return None


def _is_repeated(field: FieldDescriptor) -> bool:
    # FieldDescriptor.label is deprecated in newer protobuf; is_repeated is missing in older.
    repeated = getattr(field, "is_repeated", None)
    if repeated is not None:
        return bool(repeated)
    return field.label == FieldDescriptor.LABEL_REPEATED  # type: ignore[attr-defined,unused-ignore]
