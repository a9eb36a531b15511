"""Conveyor's own gRPC transport: HTTP/2 for one service, on the server's event loop.

grpcio's Python server spends more per call than the service does (its Cython layer, a
coroutine and completion-queue hand-off per call), so the default gRPC transport is this
package instead, written the way the HTTP/1.1 front end is: an asyncio protocol per
connection that parses frames by hand and calls the servicer directly.

- :mod:`.frames`: frame headers, settings, precomputed response header blocks, DATA cut from
  a message's pieces.
- :mod:`.headers`: request header blocks (HPACK, by the ``hpack`` package) and what a call
  needs of them.
- :mod:`.core`: the connection's HTTP/2 without I/O, in the shape of python-hyper's ``h2``:
  bytes in, :mod:`.events` out, buffers to send; its stream states in :mod:`.streams` and
  flow-control windows in :mod:`.flow`.
- :mod:`.calls`: one call's state and :class:`~.calls.CallContext`, the part of grpcio's
  servicer context the servicer uses, so the servicer serves both transports unchanged.
- :mod:`.connection`: the asyncio glue: the core's events become calls (messages read
  straight into their buffers), handlers run, answers go out from the tensors' own buffers.
- :mod:`.server`: listening, and draining with GOAWAY.

Only HPACK decoding is delegated (to ``hpack``): its dynamic table is state every client keeps
in step with, and decoding is a small part of a call's cost once its blocks are cached.
"""
