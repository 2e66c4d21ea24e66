"""The benchmarks' helpers that count: a sliding window over a request log, which requests Telegram
counts, a command's acknowledgement, the backlog's delivered jobs, and marks from another process
given to their jobs."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))  # they import each other so

import _common  # noqa: E402
import _trace  # noqa: E402
import backlog  # noqa: E402
import channel  # noqa: E402


@pytest.mark.parametrize(("times", "window", "most"), [
    ([], 1.0, 0),
    ([5.0], 1.0, 1),
    ([0.0, 0.5, 0.99, 1.0, 1.5], 1.0, 3),  # [0, 1) holds 0, 0.5, 0.99; 1.0 starts the next second
    ([0.0, 0.6, 1.2, 1.3, 1.4, 3.0], 1.0, 4),  # [0.6, 1.6): a span that starts between whole seconds
    ([2.0, 0.0, 1.0, 0.5], 1.0, 2),  # any order
    ([0.0] * 30 + [0.999] * 30, 1.0, 60),  # a burst of 30 and 30 more within the second
    ([0.0, 9.9, 10.0, 10.1], 10.0, 3),  # [9.9, 19.9)
])
def test_max_in_window_counts_any_sliding_span(times, window, most):
    assert _common.max_in_window(times, window) == most


@pytest.mark.parametrize(("method", "counted"), [
    ("sendMessage", True), ("sendDocument", True), ("editMessageReplyMarkup", True), ("deleteMessage", True),
    ("copyMessage", True), ("forwardMessages", True), ("sendmessage", True),
    ("sendChatAction", False), ("getUpdates", False), ("answerCallbackQuery", False), ("getFile", False),
    ("setMyCommands", False),
])
def test_is_message_counts_what_telegrams_limits_count(method, counted):
    assert _common.is_message(method) is counted


def test_a_job_cancelled_after_its_file_went_is_delivered_not_a_duplicate():
    jobs = [("succeeded", True), ("cancelled", True), ("cancelled", False), ("failed", True), ("queued", False)]
    assert backlog.delivered_jobs(jobs) == 2


def test_adopted_marks_go_to_the_job_begun_last_before_them(monkeypatch):
    clock = iter([10.0, 20.0])
    monkeypatch.setattr(_trace.time, "perf_counter", lambda: next(clock))
    trace = _trace.Trace()
    trace.begin()
    trace.begin()
    trace.adopt([("update", 9.0), ("update", 11.0), ("submit", 12.0), ("update", 21.0), ("update", 22.0)])
    assert trace.jobs == [{"injected": 10.0, "update": 11.0, "submit": 12.0}, {"injected": 20.0, "update": 21.0}]


def test_a_command_is_acknowledged_by_a_reply_to_it_or_a_queue_message_listing_it_after_its_commit():
    # (when, the message it replies to, the jobs it lists as the chat's queue message)
    answers = [(1.0, None, 1), (2.0, 7, None), (3.0, 8, None), (4.0, None, 3), (5.0, None, 5)]
    assert channel.acknowledged(answers, 1.5, 8, 1, end=99.0) == 3.0  # its reply, not the one to command 7
    assert channel.acknowledged(answers, 3.5, 9, 2, end=99.0) == 4.0  # the queue message lists 3 jobs
    assert channel.acknowledged(answers, 3.5, 9, 3, end=99.0) == 5.0  # 3 listed do not reach the 4th
    assert channel.acknowledged(answers, 0.5, 9, 0, end=99.0) == 1.0
    assert channel.acknowledged(answers, 0.5, 9, 5, end=99.0) == 99.0  # never listed
    assert channel.acknowledged(answers, 3.5, 9, None, end=99.0) == 4.0  # jobs running: any queue message
    assert channel.acknowledged(answers, None, 8, 0, end=99.0) == 99.0  # never committed


class _Call:
    def __init__(self, text):
        self.params = {"text": text}


def test_a_queue_message_says_how_many_jobs_it_lists():
    assert channel.listed(_Call("Queued /demo — position 1 in the queue.\nQueued /sd3 — position 2 in the queue.")) == 2
    assert channel.listed(_Call("Queued /demo — position 1 · starts in about 4 s.\n…and 30 more.")) == 31
    assert channel.listed(_Call("Rendering /demo…")) is None
    assert channel.listed(_Call("")) is None


def test_a_commands_place_is_its_jobs_rank_in_its_chat():
    # commands 0..5 round-robin over 2 chats; their job ids committed out of order within chat 0
    assert channel.places({0: 12, 2: 11, 4: 13, 1: 20, 3: 21, 5: 22}, 2) == {2: 0, 0: 1, 4: 2, 1: 0, 3: 1, 5: 2}
