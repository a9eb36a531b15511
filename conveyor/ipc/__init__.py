"""What crosses between Conveyor's processes: one frame format and one blocking channel.

The engine's process instances (``engine/processes``) and the front-end processes of
``--workers`` (``server/workers``) both speak it: :mod:`conveyor.ipc.frames` is the frame
(a pickle with large tensors beside it as raw bytes), :mod:`conveyor.ipc.channel` a blocking
socket that sends and receives whole frames, with file descriptors riding along.
"""
