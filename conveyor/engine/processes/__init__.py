"""Process instances: a Python model's instances as worker processes, for GIL-bound code.

    engine process                      zygote (forked once per load)     workers (forked)
    queue -> instance thread i  ──Execute──►                         ──►  worker i: model.run
             WorkerSlot i.run   ◄─Executed──                              (weights shared
             (shared-memory buffers)         load() once, gc.freeze()      copy-on-write)

- ``zygote.py``: the process that loads the model once and forks every worker from itself.
- ``worker.py``: a worker's loop.
- ``pool.py``: the engine's side: ProcessPool (the zygote), WorkerSlot (a LoadedModel whose
  ``run`` ships to a worker), ProcessInstances (same take/execute shape as ThreadInstances).
- ``shm.py``: memfd shared-memory buffers and the tensor layout in them.
- ``channel.py`` / ``messages.py``: the framed, pickled control messages (tensors only in a
  worker's rare ``Call`` to another model; a batch's travel through shared memory).
"""

from conveyor.engine.processes.pool import ProcessInstances, ProcessPool

__all__ = ["ProcessInstances", "ProcessPool"]
