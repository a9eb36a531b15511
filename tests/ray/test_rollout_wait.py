"""How long ``conveyor ray deploy`` waits before trusting Ray Serve's "to be scheduled"
message: Serve's own delay, read from the variables Serve reads, plus a margin."""

from __future__ import annotations

import pytest

pytest.importorskip("ray.serve")

from conveyor.errors import ConveyorError
from conveyor.ray.rollout import unscheduled_after_s


def test_serve_defaults_give_35_s() -> None:
    assert unscheduled_after_s({}) == 35.0


def test_the_later_of_delay_and_period_counts() -> None:
    both = {
        "RAY_SERVE_SLOW_STARTUP_WARNING_S": "4",
        "RAY_SERVE_SLOW_STARTUP_WARNING_PERIOD_S": "8",
    }
    assert unscheduled_after_s(both) == 13.0
    assert unscheduled_after_s({"RAY_SERVE_SLOW_STARTUP_WARNING_S": "60"}) == 65.0


def test_the_older_names_count_and_the_ray_names_win() -> None:
    older = {"SERVE_SLOW_STARTUP_WARNING_S": "2", "SERVE_SLOW_STARTUP_WARNING_PERIOD_S": "3"}
    assert unscheduled_after_s(older) == 8.0
    assert unscheduled_after_s({**older, "RAY_SERVE_SLOW_STARTUP_WARNING_PERIOD_S": "1"}) == 7.0


def test_a_value_serve_cannot_read_is_named() -> None:
    with pytest.raises(ConveyorError, match="RAY_SERVE_SLOW_STARTUP_WARNING_S must be a whole"):
        unscheduled_after_s({"RAY_SERVE_SLOW_STARTUP_WARNING_S": "ten"})
