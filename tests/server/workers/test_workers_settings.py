"""``--workers``: the option, its bounds, and what 0 means."""

from __future__ import annotations

import os

import pytest

from conveyor.cli import build_parser
from conveyor.server.settings import Settings, from_arguments
from conveyor.server.workers.pool import default_count


def test_one_front_end_in_this_process_by_default() -> None:
    assert Settings().workers == 1


def test_the_option_sets_the_count() -> None:
    args = build_parser().parse_args(["serve", "--workers", "4"])
    assert from_arguments(args).workers == 4


def test_a_negative_count_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="workers"):
        Settings(workers=-1)


def test_zero_means_the_cores_this_process_may_use_capped() -> None:
    assert default_count() == max(1, min(32, len(os.sched_getaffinity(0))))


def test_front_end_process_is_off_by_default_and_set_by_its_option() -> None:
    assert Settings().front_end_process is False
    args = build_parser().parse_args(["serve", "--front-end-process"])
    assert from_arguments(args).front_end_process is True
