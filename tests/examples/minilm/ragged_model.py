"""A Python model with one ragged input, for the tests of ragged batching and of its
padding counters."""

# Sums each row (padding zeros add nothing) and reports the width it was given and how many
# executions it has run, so a test sees that the requests went through one padded call.
RAGGED_MODEL = """
import numpy as np

class Model:
    def load(self, config):
        self.executions = 0

    def infer(self, inputs):
        self.executions += 1
        values = inputs["VALUES"]
        rows = values.shape[0]
        return {
            "SUM": values.sum(axis=1, keepdims=True, dtype=np.int64),
            "WIDTH": np.full((rows, 1), values.shape[1], dtype=np.int64),
            "EXECUTION": np.full((rows, 1), self.executions, dtype=np.int64),
        }
"""

RAGGED_CONFIG = """
backend = "python"
max_batch_size = 4
instances = 1

[dynamic_batching]
# Long enough that the requests of a test always meet; a full batch (4 rows) leaves at
# once.
max_queue_delay_us = 30000000

[[inputs]]
name = "VALUES"
datatype = "INT64"
shape = [-1]
allow_ragged_batch = true

[[outputs]]
name = "SUM"
datatype = "INT64"
shape = [1]

[[outputs]]
name = "WIDTH"
datatype = "INT64"
shape = [1]

[[outputs]]
name = "EXECUTION"
datatype = "INT64"
shape = [1]
"""
