"""Where the bench sends requests: ``inprocess`` (the engine, no server), ``http://``, ``grpc://``.

Each target has a control side (``describe``, ``statistics``; blocking, used by the runner
between measurements) and an async ``Client`` that sends one prepared request per
``infer()`` call (used by the load generator in each generator process). ``pick`` builds
the pair for a URL; the interface lives in ``base``, which imports no implementation.
"""
