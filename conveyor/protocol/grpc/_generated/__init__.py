"""Protobuf modules generated from proto/*.proto by scripts/gen_proto.py (do not edit them).

``POOL`` is Conveyor's own descriptor pool. The generated modules register their messages
here, not in protobuf's process-wide default pool, because tritonclient registers the very same
``inference.*`` names there and protobuf refuses a second definition of a name: with a private
pool, Conveyor's server or client and tritonclient can be imported in one process.
"""

from google.protobuf import descriptor_pool

POOL = descriptor_pool.DescriptorPool()
