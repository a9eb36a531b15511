"""Just enough protobuf wire format for the V2 gRPC messages the bench sends and reads.

The bench speaks plain V2 to any server (Conveyor, Triton, MLServer), so it does not depend
on one server's generated code: it writes ModelInferRequest / ModelMetadataRequest /
ModelStatisticsRequest itself and walks the few response fields it reads. Field numbers are
those of the public ``inference.GRPCInferenceService`` definition (grpc_service.proto).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 travel as ten-byte two's complement
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def field_bytes(field: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return _key(field, _LEN) + _varint(len(data)) + data


def field_packed_int64(field: int, values: Sequence[int]) -> bytes:
    return field_bytes(field, b"".join(_varint(int(v)) for v in values))


def string_request(name: str, version: str = "") -> bytes:
    """ModelMetadataRequest, ModelConfigRequest and ModelStatisticsRequest: name=1, version=2."""
    out = field_bytes(1, name) if name else b""
    return out + (field_bytes(2, version) if version else b"")


def infer_request(
    model: str,
    version: str,
    inputs: Mapping[str, tuple[str, Sequence[int], bytes]],
    outputs: Sequence[str] = (),
) -> bytes:
    """ModelInferRequest with raw_input_contents; ``inputs``: name -> (datatype, shape, raw)."""
    parts = [field_bytes(1, model)]
    if version:
        parts.append(field_bytes(2, version))
    for name, (datatype, shape, _raw) in inputs.items():
        tensor = field_bytes(1, name) + field_bytes(2, datatype) + field_packed_int64(3, shape)
        parts.append(field_bytes(5, tensor))
    parts.extend(field_bytes(6, field_bytes(1, name)) for name in outputs)
    parts.extend(field_bytes(7, raw) for _dt, _shape, raw in inputs.values())
    return b"".join(parts)


def _read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(data: bytes | memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) of one message's top-level fields, in order."""
    view = memoryview(data)
    pos, end = 0, len(view)
    while pos < end:
        key, pos = _read_varint(view, pos)
        field, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _read_varint(view, pos)
            yield field, wire, value
        elif wire == _LEN:
            size, pos = _read_varint(view, pos)
            yield field, wire, view[pos : pos + size]
            pos += size
        elif wire == _I64:
            yield field, wire, int.from_bytes(view[pos : pos + 8], "little")
            pos += 8
        elif wire == _I32:
            yield field, wire, int.from_bytes(view[pos : pos + 4], "little")
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def payload(value: int | memoryview) -> memoryview:
    """A length-delimited field's bytes; a number in its place means a malformed message."""
    if isinstance(value, int):
        raise ValueError(f"expected a length-delimited protobuf field, got the number {value}")
    return value


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _packed(value: int | memoryview) -> list[int]:
    if isinstance(value, int):  # an unpacked repeated element
        return [_signed(value)]
    out, pos = [], 0
    while pos < len(value):
        v, pos = _read_varint(value, pos)
        out.append(_signed(v))
    return out


def _tensor_metadata(data: memoryview) -> dict:
    tensor: dict = {"name": "", "datatype": "", "shape": []}
    for field, _wire, value in fields(data):
        if field == 1:
            tensor["name"] = bytes(value).decode()
        elif field == 2:
            tensor["datatype"] = bytes(value).decode()
        elif field == 3:
            tensor["shape"].extend(_packed(value))
    return tensor


def metadata_response(data: bytes) -> dict:
    """ModelMetadataResponse as the HTTP metadata JSON (name, versions, platform, tensors)."""
    out: dict = {"name": "", "versions": [], "platform": "", "inputs": [], "outputs": []}
    for field, _wire, value in fields(data):
        if field == 1:
            out["name"] = bytes(value).decode()
        elif field == 2:
            out["versions"].append(bytes(value).decode())
        elif field == 3:
            out["platform"] = bytes(value).decode()
        elif field in (4, 5):
            key = "inputs" if field == 4 else "outputs"
            out[key].append(_tensor_metadata(payload(value)))
    return out


def config_max_batch_size(data: bytes) -> int:
    """ModelConfigResponse.config (1).max_batch_size (4)."""
    for field, _wire, value in fields(data):
        if field == 1:
            for inner, _w, inner_value in fields(payload(value)):
                if inner == 4:
                    return _signed(int(inner_value))
    return 0


def _duration(data: memoryview) -> dict:
    out: dict = {"count": 0, "ns": 0}
    for field, _wire, value in fields(data):
        if field == 1:
            out["count"] = value
        elif field == 2:
            out["ns"] = value
    return out


_STAT_FIELDS = {1: "success", 2: "fail", 3: "queue", 4: "compute_input", 5: "compute_infer",
                6: "compute_output"}


def statistics_response(data: bytes) -> dict:
    """ModelStatisticsResponse as the HTTP statistics-extension JSON (``model_stats``)."""
    stats = []
    for field, _wire, value in fields(data):
        if field != 1:
            continue
        model: dict = {"name": "", "version": "", "inference_count": 0, "execution_count": 0,
                       "inference_stats": {}}
        for inner, _w, inner_value in fields(payload(value)):
            if inner == 1:
                model["name"] = bytes(inner_value).decode()
            elif inner == 2:
                model["version"] = bytes(inner_value).decode()
            elif inner == 4:
                model["inference_count"] = inner_value
            elif inner == 5:
                model["execution_count"] = inner_value
            elif inner == 6:
                parts = model["inference_stats"]
                for stat, _w2, stat_value in fields(payload(inner_value)):
                    if stat in _STAT_FIELDS:
                        parts[_STAT_FIELDS[stat]] = _duration(payload(stat_value))
        stats.append(model)
    return {"model_stats": stats}


def raw_output_sizes(data: bytes) -> list[int]:
    """Lengths of ModelInferResponse.raw_output_contents (6): what a response carried."""
    return [len(payload(value)) for field, _w, value in fields(data) if field == 6]

