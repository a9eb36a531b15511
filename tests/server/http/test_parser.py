"""The HTTP/1.1 request parser, driven with bytes only: no socket, no event loop."""

from __future__ import annotations

import pytest

from conveyor.errors import InvalidInput, Unauthenticated
from conveyor.server.http.parser import (
    BEGIN,
    COMPLETE,
    DIRECT_BODY,
    HEAD,
    MAX_HEAD_BYTES,
    REJECT,
    ParsedRequest,
    RequestParser,
)

LIMIT = 1 << 20


def post(path: str, body: bytes, *extra: bytes) -> bytes:
    head = b"POST %s HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n" % (path.encode(), len(body))
    return head + b"".join(line + b"\r\n" for line in extra) + b"\r\n" + body


def completed(events: list[tuple[int, ParsedRequest]]) -> list[ParsedRequest]:
    return [request for kind, request in events if kind == COMPLETE]


def test_one_request_gives_begin_head_complete_with_its_fields() -> None:
    parser = RequestParser(LIMIT)
    data = post("/v2/models/a%20b/infer?x=1", b"{}", b"Inference-Header-Content-Length: 2")
    events = parser.feed(data)
    assert [kind for kind, _ in events] == [BEGIN, HEAD, COMPLETE]
    request = events[-1][1]
    assert (request.method, request.path) == ("POST", "/v2/models/a b/infer")
    assert request.header_length == b"2" and request.keep_alive
    assert request.joined_body() == b"{}"
    assert parser.current is None


def test_pipelined_requests_complete_in_order() -> None:
    parser = RequestParser(LIMIT)
    data = post("/one", b"1") + b"GET /two HTTP/1.1\r\nhost: x\r\n\r\n" + post("/three", b"333")
    requests = completed(parser.feed(data))
    assert [(r.method, r.path, bytes(r.joined_body())) for r in requests] == [
        ("POST", "/one", b"1"),
        ("GET", "/two", b""),
        ("POST", "/three", b"333"),
    ]


def test_a_request_split_at_every_byte_reads_the_same() -> None:
    data = post("/v2/models/m/infer", b'{"inputs": []}', b"Traceparent: 00-ab-cd-01")
    for cut in range(1, len(data)):
        parser = RequestParser(LIMIT)
        first = parser.feed(data[:cut])
        requests = completed(first + parser.feed(data[cut:]))
        assert len(requests) == 1, cut
        assert bytes(requests[0].joined_body()) == b'{"inputs": []}', cut
        assert requests[0].traceparent == b"00-ab-cd-01", cut


def test_a_chunked_body_is_decoded() -> None:
    parser = RequestParser(LIMIT)
    data = (
        b"POST /v2/models/m/infer HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"
    )
    (request,) = completed(parser.feed(data))
    assert request.chunked and request.joined_body() == b"abcdefg"


def test_a_large_body_is_read_into_its_own_buffer() -> None:
    parser = RequestParser(LIMIT)
    body = bytes(range(256)) * (DIRECT_BODY // 256 + 1)
    data = post("/v2/models/m/infer", body)
    head_and_some = len(data) - len(body) + 100
    events = parser.feed(data[:head_and_some])
    assert completed(events) == [] and parser.direct is not None
    # The socket reads the rest straight into the body's buffer, in two reads.
    rest = data[head_and_some:]
    for piece in (rest[:1000], rest[1000:]):
        target = parser.direct_target
        target[: len(piece)] = piece
        events = parser.direct_filled(len(piece))
    (request,) = completed(events)
    assert bytes(request.joined_body()) == body and parser.direct is None
    # The parser starts afresh for the next request on the connection.
    assert completed(parser.feed(post("/next", b"x")))[0].path == "/next"


def test_a_declared_length_over_the_limit_is_refused_before_its_body() -> None:
    parser = RequestParser(100)
    events = parser.feed(post("/v2/models/m/infer", b"x" * 101))
    assert [kind for kind, _ in events] == [BEGIN, REJECT]
    request = events[-1][1]
    assert "the limit is 100 bytes" in str(request.error) and not request.keep_alive
    assert parser.discarding and parser.feed(post("/more", b"")) == []


def test_a_chunked_body_over_the_limit_is_refused_as_it_grows() -> None:
    parser = RequestParser(5)
    data = b"POST /p HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n6\r\nabcdef\r\n0\r\n\r\n"
    events = parser.feed(data)
    assert events[-1][0] == REJECT and "more than 5 bytes" in str(events[-1][1].error)


def test_an_oversized_head_is_refused() -> None:
    parser = RequestParser(LIMIT)
    big = b"x-filler: " + b"a" * (MAX_HEAD_BYTES + 1)
    events = parser.feed(post("/p", b"", big))
    assert events[-1][0] == REJECT
    assert f"request head is over {MAX_HEAD_BYTES} bytes" in str(events[-1][1].error)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"GARBAGE\r\n\r\n", "malformed HTTP request"),
        (b"GET / HTTP/1.1\r\nbad header\r\n\r\n", "malformed HTTP request"),
        (b"GET / HTTP/1.1\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n", "upgrades"),
    ],
)
def test_malformed_input_raises_invalid_input(data: bytes, words: str) -> None:
    with pytest.raises(InvalidInput, match=words):
        RequestParser(LIMIT).feed(data)


def test_the_token_guard_refuses_at_the_head() -> None:
    def authorize(path: str, authorization: bytes | None) -> None:
        if path != "/v2/health/live" and authorization != b"Bearer s3cret":
            raise Unauthenticated("a bearer token is required")

    parser = RequestParser(LIMIT, authorize)
    assert completed(parser.feed(b"GET /v2/health/live HTTP/1.1\r\n\r\n"))
    allowed = parser.feed(post("/v2/models/m/infer", b"{}", b"Authorization: Bearer s3cret"))
    assert completed(allowed)
    events = parser.feed(post("/v2/models/m/infer", b"{}"))
    assert events[-1][0] == REJECT and isinstance(events[-1][1].error, Unauthenticated)


def test_expect_continue_and_connection_close_are_read() -> None:
    parser = RequestParser(LIMIT)
    data = post("/p", b"", b"Expect: 100-continue", b"Connection: close")
    (request,) = completed(parser.feed(data))
    assert request.expect_continue and not request.keep_alive
