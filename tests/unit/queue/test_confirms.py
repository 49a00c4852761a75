"""The confirm wait of the RabbitMQ queue without a server: RabbitMQ's answers counted by delivery tag, a refused
message or a silent broker an error, never a batch taken for sent."""

from __future__ import annotations

from collections import defaultdict

import amqp
import pytest
from amqp.exceptions import MessageNacked
from kombu.exceptions import OperationalError

from webhooks.queue.confirms import ConfirmingChannel


class FakeChannel:
    """What ConfirmingChannel uses of a py-amqp channel; ``wait`` hands over RabbitMQ's next answer."""

    def __init__(self, answers: list[tuple[str, int, bool] | None]) -> None:
        self.events: defaultdict[str, set] = defaultdict(set)
        self.answers = answers
        self.selected = False
        self.is_open = True

    def confirm_select(self) -> None:
        self.selected = True

    def wait(self, methods, timeout=None) -> None:
        answer = self.answers.pop(0)
        if answer is None:
            raise TimeoutError("timed out")  # what socket.timeout is
        event, tag, multiple = answer
        for callback in self.events[event]:
            callback(tag, multiple)


@pytest.fixture(autouse=True)
def published(monkeypatch):
    sent = []
    monkeypatch.setattr(amqp.Channel, "basic_publish", lambda channel, *args, **kwargs: sent.append(args))
    return sent


def confirming(answers, count: int) -> ConfirmingChannel:
    channel = ConfirmingChannel(FakeChannel(answers))
    for n in range(count):
        channel.channel.basic_publish(f"message {n}")
    return channel


def test_publishes_wait_for_nothing_and_one_wait_takes_every_answer(published):
    channel = confirming([("basic_ack", 2, True), ("basic_ack", 3, False)], 3)
    assert channel.channel.selected and published == [("message 0",), ("message 1",), ("message 2",)]
    assert channel.unanswered == {1, 2, 3}
    channel.wait(5)
    assert channel.unanswered == set() and channel.confirmed(range(1, 4))
    assert channel.channel.answers == []


def test_a_nack_raises_and_leaves_its_messages_unconfirmed():
    channel = confirming([("basic_ack", 1, False), ("basic_nack", 3, True)], 3)
    with pytest.raises(MessageNacked, match="RabbitMQ refused 2 task messages."):
        channel.wait(5)
    assert channel.confirmed(range(1, 2)) and not channel.confirmed(range(2, 3)) and not channel.confirmed(range(3, 4))


def test_no_answer_in_time_is_an_operational_error_and_nothing_is_taken_for_confirmed():
    channel = confirming([("basic_ack", 1, False), None], 2)
    with pytest.raises(OperationalError, match="did not confirm 1 task messages within 5 seconds"):
        channel.wait(5)
    assert not channel.confirmed(range(1, 3)) and channel.confirmed(range(1, 2))


def test_an_answer_to_an_earlier_publish_counts_for_it_only():
    channel = confirming([("basic_ack", 1, False)], 1)
    channel.wait(5)
    channel.channel.answers = [("basic_ack", 1, False), ("basic_ack", 2, True)]  # a late repeat, then ours
    channel.channel.basic_publish("message 1")
    channel.wait(5)
    assert channel.published == 2 and channel.confirmed(range(2, 3)) and channel.channel.answers == []
