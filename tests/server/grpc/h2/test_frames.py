"""Conveyor's gRPC transport at the frame level: a raw HTTP/2 client against a real server."""

from __future__ import annotations

import socket
import struct
import threading
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient

from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.testing import RunningServer
from tests.models import RunLog
from tests.server.grpc.h2.raw_client import (
    DATA,
    GOAWAY,
    HEADERS,
    MAX_FRAME_SIZE,
    PING,
    PREFACE,
    SETTINGS,
    WINDOW_UPDATE,
    RawClient,
    frame,
    grpc_message,
)
from tests.server.grpc.h2.requests import (
    MAX_MESSAGE_BYTES,
    identity_request,
    runs_request,
    tiny_output,
    tiny_request,
)

OK, INVALID_ARGUMENT, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, UNIMPLEMENTED = 0, 3, 4, 8, 12


def tritonclient_still_serves(server: RunningServer) -> None:
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        x = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
        x.set_data_from_numpy(np.ones((1, 16), np.float32))
        result = client.infer("tiny", [x])
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full((1, 16), 2, np.float32))


def test_a_unary_call_and_the_settings_exchange(server: RunningServer) -> None:
    with RawClient(server.grpc_port) as client:
        answer = client.call("ModelInfer", tiny_request("a"))
        assert answer.status() == OK, answer.message()
        assert dict(answer.headers)[":status"] == "200"
        assert dict(answer.headers)["content-type"] == "application/grpc"
        (message,) = answer.messages()
        np.testing.assert_array_equal(tiny_output(message), np.arange(16) + 1)
        assert pb.ModelInferResponse.FromString(message).id == "a"
        # The server's SETTINGS came first, and it acknowledged ours.
        assert client.frames[0].kind == SETTINGS
        assert any(f.kind == SETTINGS and f.flags & 1 for f in client.frames)


def test_garbage_instead_of_a_preface_closes_only_that_connection(server: RunningServer) -> None:
    with RawClient(server.grpc_port) as healthy:
        with RawClient(server.grpc_port, settings=False) as rude:
            rude.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + bytes(range(256)) * 4)
            rude.until_eof()
        # The other connection, opened before, goes on; new clients are served too.
        assert healthy.call("ModelInfer", tiny_request()).status() == OK
    tritonclient_still_serves(server)


def test_a_frame_of_garbage_after_the_preface_is_a_goaway(server: RunningServer) -> None:
    with RawClient(server.grpc_port) as client:
        client.send(frame(HEADERS, 0x4, 1, b"\xff" * 40))  # not HPACK
        frames = client.until_eof()
        assert any(f.kind == GOAWAY for f in frames)
    tritonclient_still_serves(server)


def test_an_unknown_method_is_unimplemented(server: RunningServer) -> None:
    with RawClient(server.grpc_port) as client:
        answer = client.call("NoSuchMethod", b"")
        assert answer.status() == UNIMPLEMENTED
        other = client.call("", b"", path="/other.Service/ModelInfer")
        assert other.status() == UNIMPLEMENTED
        # Trailers-only: one HEADERS frame with the status, no DATA.
        assert not answer.data
        assert client.call("ModelInfer", tiny_request()).status() == OK


def test_unparseable_bytes_are_invalid_argument(server: RunningServer) -> None:
    with RawClient(server.grpc_port) as client:
        for method in ("ModelInfer", "ModelMetadata"):
            answer = client.call(method, b"\xff\xff\xff")
            assert answer.status() == INVALID_ARGUMENT, answer.message()
            assert "could not parse" in answer.message()


def test_a_message_over_the_limit_is_refused_before_it_is_read(server: RunningServer) -> None:
    with RawClient(server.grpc_port) as client:
        stream_id = client.headers("ModelInfer")
        # Only the 5-byte prefix announcing the size: the server answers without the body.
        client.send(frame(DATA, 0, stream_id, b"\x00" + (MAX_MESSAGE_BYTES + 1).to_bytes(4, "big")))
        answer = client.until_closed(stream_id)
        assert answer.status() == RESOURCE_EXHAUSTED
        assert f"{MAX_MESSAGE_BYTES + 1} vs. {MAX_MESSAGE_BYTES}" in answer.message()
        assert client.call("ModelInfer", tiny_request()).status() == OK


def test_headers_in_continuation_frames_and_ping(server: RunningServer) -> None:
    with RawClient(server.grpc_port) as client:
        extra = [
            ("x-padding", "p" * 300),
            ("traceparent", "00-" + "1" * 32 + "-" + "2" * 16 + "-01"),
        ]
        answer = client.call("ModelInfer", tiny_request("c"), extra=extra, split=7)
        assert answer.status() == OK, answer.message()
        client.send(frame(PING, 0, 0, b"12345678"))
        while True:
            received = client.read_frame()
            assert received is not None
            if received.kind == PING:
                assert received.flags & 1 and received.payload == b"12345678"
                break


def test_error_messages_are_percent_encoded(server: RunningServer) -> None:
    with RawClient(server.grpc_port) as client:
        request = pb.ModelInferRequest(model_name="nö such model 100%")
        answer = client.call("ModelInfer", request.SerializeToString())
        assert answer.status() != OK
        raw = dict(answer.trailers or answer.headers)["grpc-message"]
        assert "%C3%B6" in raw and "100%25" in raw and "ö" not in raw
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as triton:
        try:
            triton.get_model_metadata("nö such model 100%")
        except Exception as exc:  # tritonclient decodes the message back
            assert "nö such model 100%" in str(exc)
        else:
            raise AssertionError("an unknown model was found")


def test_4_mib_both_ways_within_the_clients_small_windows(server: RunningServer) -> None:
    """The client keeps the default 64 KiB windows and 16 KiB frames, and gives window back
    only as it reads: the server never sends past them, and every byte comes back."""
    payload = np.random.default_rng(7).integers(0, 255, 4 * 1024 * 1024, np.uint8).tobytes()
    with RawClient(server.grpc_port, give_back=False) as client:
        stream_id = client.headers("ModelInfer")
        client.data(stream_id, grpc_message(identity_request(payload)))
        window = {0: 65_535, stream_id: 65_535}
        answer = client.answers[stream_id]
        while not answer.ended:
            received = client.read_frame()
            assert received is not None, "connection closed"
            if received.kind == DATA:
                size = len(received.payload)
                assert size <= 16_384, "over the default max frame size"
                window[0] -= size
                window[stream_id] -= size
                assert window[0] >= 0 and window[stream_id] >= 0, "over the client's window"
                if size:  # give it back, as a reading client does
                    for key in (0, stream_id):
                        client.send(frame(WINDOW_UPDATE, 0, key, size.to_bytes(4, "big")))
                        window[key] += size
        assert answer.status() == OK, answer.message()
        (message,) = answer.messages()
        response = pb.ModelInferResponse.FromString(message)
        assert response.raw_output_contents[0] == payload
        assert client.server_settings[0x4] >= 4 * 1024 * 1024 + 1024  # a 4 MiB send fits at once
        assert (
            MAX_FRAME_SIZE not in client.server_settings
            or client.server_settings[MAX_FRAME_SIZE] >= 16_384
        )


def test_many_concurrent_calls_on_one_connection(server: RunningServer) -> None:
    count = 300
    with RawClient(server.grpc_port) as client:
        streams = {}
        for i in range(count):  # every call opened before any is read
            stream_id = client.headers("ModelInfer")
            streams[stream_id] = str(i)
            client.data(stream_id, grpc_message(tiny_request(str(i))))
        for stream_id, request_id in streams.items():
            answer = client.until_closed(stream_id)
            assert answer.status() == OK, answer.message()
            (message,) = answer.messages()
            assert pb.ModelInferResponse.FromString(message).id == request_id


def test_a_cancelled_stream_drops_its_queued_requests(
    server: RunningServer, repository: Path
) -> None:
    runs = RunLog(repository, "runs")
    runs.clear()
    with RawClient(server.grpc_port) as client:
        stream_id = client.headers("ModelStreamInfer")
        client.data(stream_id, grpc_message(runs_request(b"first", 0.5)), end_stream=False)
        runs.wait_for("first")
        for tag in (b"q1", b"q2", b"q3"):  # queued behind "first" (one instance)
            client.data(stream_id, grpc_message(runs_request(tag, 0.0)), end_stream=False)
        client.reset(stream_id)
        # The connection goes on; a request sent after the reset runs after "first"...
        answer = client.call("ModelInfer", runs_request(b"after", 0.0))
        assert answer.status() == OK, answer.message()
    # ...and the queued ones never ran.
    assert runs.tags() == ["first", "after"]


def test_a_stream_answers_each_request_as_it_completes(server: RunningServer) -> None:
    with RawClient(server.grpc_port) as client:
        stream_id = client.headers("ModelStreamInfer")
        for i in range(20):
            client.data(stream_id, grpc_message(tiny_request(str(i))), end_stream=False)
        client.data(stream_id, b"", end_stream=True)
        answer = client.until_closed(stream_id)
        assert answer.status() == OK, answer.message()
        ids = sorted(
            int(pb.ModelStreamInferResponse.FromString(m).infer_response.id)
            for m in answer.messages()
        )
        assert ids == list(range(20))


def test_a_client_that_vanishes_mid_message_harms_no_one(server: RunningServer) -> None:
    def vanish() -> None:
        with socket.create_connection(("127.0.0.1", server.grpc_port)) as sock:
            sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
            block = b"\x83\x86"  # POST, http: no path; the stream is abandoned anyway
            sock.sendall(frame(HEADERS, 0x4, 1, block))
            sock.sendall(frame(DATA, 0, 1, b"\x00" + (1 << 20).to_bytes(4, "big") + bytes(1000)))

    threads = [threading.Thread(target=vanish) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tritonclient_still_serves(server)


def test_window_update_and_settings_frames_of_a_bad_size_end_the_connection(
    server: RunningServer,
) -> None:
    with RawClient(server.grpc_port) as client:
        client.send(frame(SETTINGS, 0, 0, b"\x00\x04\x00"))  # not a multiple of 6
        assert any(f.kind == GOAWAY for f in client.until_eof())
    with RawClient(server.grpc_port) as client:
        client.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">H", 1)))
        assert any(f.kind == GOAWAY for f in client.until_eof())
    tritonclient_still_serves(server)


def test_a_call_past_its_grpc_timeout_is_deadline_exceeded(server: RunningServer) -> None:
    with RawClient(server.grpc_port) as client:
        # The model sleeps 1 s; the client allows 100 ms and, unlike a real client, never
        # cancels by itself: the server ends the call.
        answer = client.call(
            "ModelInfer", runs_request(b"late", 1.0), extra=[("grpc-timeout", "100m")]
        )
        assert answer.status() == DEADLINE_EXCEEDED, answer.message()
        assert client.call("ModelInfer", tiny_request()).status() == OK


def test_announced_messages_past_the_connections_budget_are_refused(
    server: RunningServer,
) -> None:
    """Each prefix announces a maximal message and sends none of it: the server holds
    buffers for a bounded number (64 MiB here), refuses the next, and serves the rest."""
    with RawClient(server.grpc_port) as client:
        announced = []
        for _ in range(9):  # 9 x 8 MiB > 64 MiB
            stream_id = client.headers("ModelInfer")
            client.send(frame(DATA, 0, stream_id, b"\x00" + MAX_MESSAGE_BYTES.to_bytes(4, "big")))
            announced.append(stream_id)
        refused = client.until_closed(announced[-1])
        assert refused.status() == RESOURCE_EXHAUSTED
        assert "unfinished messages" in refused.message()
        for stream_id in announced[:-1]:  # cancelled: their buffers are let go
            client.reset(stream_id)
        assert client.call("ModelInfer", tiny_request()).status() == OK
        # After the resets the budget is free again.
        stream_id = client.headers("ModelInfer")
        payload = bytes(MAX_MESSAGE_BYTES - 64)
        client.data(stream_id, grpc_message(identity_request(payload)))
        answer = client.until_closed(stream_id)
        assert answer.status() == OK, answer.message()


def test_a_stream_without_window_does_not_hold_up_the_others(server: RunningServer) -> None:
    """Two 1 MiB answers on one connection; the client gives window back to the second
    stream only: the second completes while the first waits, then the first completes."""
    payload = bytes(range(256)) * 4096  # 1 MiB
    with RawClient(server.grpc_port, give_back=False) as client:
        stalled = client.headers("ModelInfer")
        client.data(stalled, grpc_message(identity_request(payload)))
        flowing = client.headers("ModelInfer")
        client.data(flowing, grpc_message(identity_request(payload)))
        while not client.answers[flowing].ended:
            received = client.read_frame()
            assert received is not None, "connection closed"
            if received.kind == DATA and received.payload:
                size = len(received.payload).to_bytes(4, "big")
                client.send(frame(WINDOW_UPDATE, 0, 0, size))  # the connection's, always
                if received.stream_id == flowing:
                    client.send(frame(WINDOW_UPDATE, 0, flowing, size))
        answer = client.answers[flowing]
        assert answer.status() == OK, answer.message()
        (message,) = answer.messages()
        assert pb.ModelInferResponse.FromString(message).raw_output_contents[0] == payload
        assert not client.answers[stalled].ended
        client.send(frame(WINDOW_UPDATE, 0, stalled, (8 << 20).to_bytes(4, "big")))
        client.send(frame(WINDOW_UPDATE, 0, 0, (8 << 20).to_bytes(4, "big")))
        answer = client.until_closed(stalled)
        assert answer.status() == OK, answer.message()
        (message,) = answer.messages()
        assert pb.ModelInferResponse.FromString(message).raw_output_contents[0] == payload
