"""ModelVersion.submit builds each Request positionally (cheaper per request): its fields
must keep this order, or a deadline would silently become an arrival time."""

from __future__ import annotations

import dataclasses

from conveyor.engine.request import Request


def test_request_fields_keep_the_order_submit_passes_them_in():
    assert [field.name for field in dataclasses.fields(Request)][:11] == [
        "inputs",
        "outputs",
        "priority",
        "deadline",
        "future",
        "enqueued",
        "batch_size",
        "batch_key",
        "sequence",
        "parameters",
        "destinations",
    ]
