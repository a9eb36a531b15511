"""Front ends on every core over one engine: ``conveyor serve --workers N``.

    engine process (the server)                          front-end processes (N)
    engine, DataPlane, metrics port                      HTTP + gRPC over RemoteDataPlane
    FrontEndPool ── starts, replaces, SIGTERMs ──►       process.py
    FrontEndLink i  ◄── control calls (blocking) ──      RemoteDataPlane._call
                    ◄── infer/load/unload, by id ──►     RemoteDataPlane.infer -> InferFuture
    listening HTTP socket (inherited) ──────────►        accept; gRPC: SO_REUSEPORT

Parsing, tensor decoding and response encoding are most of a small request's CPU time and
run under one GIL; N front-end processes spread them over N cores. The weights, the queues,
statistics, metrics and shared-memory regions stay in the one engine process, so every
promise the engine makes (one queue per model, priorities, batching across all requests)
holds whichever front end took a request. A call crosses one Unix socket each way,
tensors as raw bytes beside a small header (``conveyor/ipc/frames.py``,
``infer_frames.py``); each side's
event loop reads the socket itself and the engine thread that answers a request writes
the reply itself (``channel.py``, ``socket_writer.py``), so a request costs the engine
process no thread hand-off beyond the engine's own.

- ``pool.py``: the supervisor (one of the server's front ends), ``host.py``: its end of
  each process's connections, ``remote.py`` / ``process.py``: the front-end process,
  ``infer_frames.py`` / ``messages.py`` / ``launch.py``: what crosses
  between them, ``channel.py`` / ``socket_writer.py``: how.
"""
