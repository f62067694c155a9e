"""Human output of the CLI: queue sets as ranges, timings in seconds, sizes, progress lines said once."""

from __future__ import annotations

import argparse
import io

import pytest

from graymq.gray_controller.cli.common import parse_size
from graymq.gray_controller.cli.text import QUEUES_WIDTH, format_queues, format_timings, id_ranges
from graymq.runbooks.progress import Progress

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("ids", "text"), [
    ([], ""), ([3], "3"), ([0, 5], "0,5"), ([0, 1], "0,1"), ([2, 0, 1, 3, 7, 5, 6], "0-3,5-7"),
])
def test_queue_ids_collapse_into_ranges(ids, text):
    assert id_ranges(ids) == text


def test_queues_of_a_client_read_per_broker_and_topic():
    queues = [f"broker-a:T1:{q}" for q in (0, 1, 2, 3, 5)] + ["broker-b:T1:0", "broker-a:%RETRY%G:1"]
    assert format_queues(queues) == "broker-a:T1:0-3,5 broker-b:T1:0 broker-a:%RETRY%G:1"


def test_a_topics_own_queues_come_before_its_retry_queues_so_a_cut_hides_the_retry_ones():
    gray = ["broker-a:%RETRY%GID_ORDER:0", "broker-a:%RETRY%GID_ORDER:5", "broker-a:TOPIC_V_ORDER:0",
            "broker-a:TOPIC_V_ORDER:5"]
    assert format_queues(gray, width=40) == "broker-a:TOPIC_V_ORDER:0,5 … +2 queues"


def test_many_queues_are_cut_to_a_width_with_the_count_left_out():
    whole_topics = [f"broker-a:TOPIC_{t}:{q}" for t in range(5) for q in range(8)]
    assert format_queues(whole_topics) == "broker-a:TOPIC_0:0-7 broker-a:TOPIC_1:0-7 … +24 queues"
    scattered = [f"broker-{b}:TOPIC_NUMBER_{t}:{q}" for b in "abc" for t in range(6) for q in range(0, 64, 2)]
    text = format_queues(scattered)
    assert text == f"broker-a:TOPIC_NUMBER_0:0,2,4,6,8,10,12,14,16 … +{len(scattered) - 9} queues"
    assert len(text) <= QUEUES_WIDTH


def test_a_queue_that_does_not_parse_is_shown_as_it_is():
    assert format_queues(["odd", "b:T:1"]) == "b:T:1 odd"


def test_timings_read_in_seconds_in_step_order():
    assert format_timings({"producers": 0.055, "drain": 0.192}) == "producers 0.06 s, drain 0.19 s"


@pytest.mark.parametrize(("text", "size"), [
    ("4096", 4096), ("64K", 64 << 10), ("64M", 64 << 20), ("1g", 1 << 30), ("64MiB", 64 << 20), ("2 MB", 2 << 20),
])
def test_sizes_take_binary_units(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "M", "1.5G", "12Q", "-1"])
def test_a_size_that_does_not_parse_is_an_argument_error(text):
    with pytest.raises(argparse.ArgumentTypeError, match="64M"):
        parse_size(text)


def test_a_repeated_note_is_printed_once_and_an_empty_note_prints_nothing():
    out = io.StringIO()
    progress = Progress(out)
    progress.note("producers report normal")
    progress.note("producers report normal")
    progress.update(1, 2, "gray backlog 5")
    progress.update(1, 2, "gray backlog 5")
    progress.note("")
    progress.note("producers report normal")  # a bar came in between: a new event
    assert out.getvalue().splitlines() == [
        "producers report normal", f"[{'#' * 15}{'.' * 15}]  50.0% gray backlog 5", "producers report normal"]


def test_progress_with_nothing_to_measure_shows_no_percentage():
    out = io.StringIO()
    Progress(out).update(0, 0, "gray backlog 0, gray consumers 1")
    assert out.getvalue() == "gray backlog 0, gray consumers 1\n"
