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
tensors as raw out-of-band pickle buffers (``wire.py``).

- ``pool.py``: the supervisor (one of the server's front ends), ``host.py``: its end of
  each process's connections, ``remote.py`` / ``process.py``: the front-end process,
  ``wire.py`` / ``messages.py`` / ``launch.py``: what crosses between them.
"""
