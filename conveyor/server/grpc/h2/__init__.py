"""Conveyor's own gRPC transport: HTTP/2 for one service, on the server's event loop.

grpcio's Python server spends more per call than the service does (its Cython layer, a
coroutine and completion-queue hand-off per call), so the default gRPC transport is this
package instead, written the way the HTTP/1.1 front end is: an asyncio protocol per
connection that parses frames by hand and calls the servicer directly.

- :mod:`.frames`: frame headers, settings, precomputed response header blocks, DATA cut from
  a message's pieces.
- :mod:`.headers`: request header blocks (HPACK, by the ``hpack`` package) and what a call
  needs of them.
- :mod:`.calls`: one call's state and :class:`~.calls.CallContext`, the part of grpcio's
  servicer context the servicer uses, so the servicer serves both transports unchanged.
- :mod:`.connection`: the protocol: reading frames (messages straight into their buffers),
  flow control both ways, dispatch, writing answers from the tensors' own buffers.
- :mod:`.server`: listening, and draining with GOAWAY.

Only HPACK decoding is delegated (to ``hpack``): its dynamic table is state every client keeps
in step with, and decoding is a small part of a call's cost once its blocks are cached.
"""
