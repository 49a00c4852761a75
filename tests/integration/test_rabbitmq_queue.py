"""The RabbitMQ queue on a real rabbitmq-server: the messages of plain Celery, sent now or with a countdown
(native delayed delivery), routed as Celery routes them; a batch confirmed by one wait, and one RabbitMQ
refuses raising kombu's OperationalError."""

from __future__ import annotations

import time
from datetime import datetime
from uuid import uuid4

import amqp
import pytest
from kombu import Connection
from kombu.exceptions import OperationalError
from kombu.transport.native_delayed_delivery import (
    MAX_LEVEL,
    calculate_routing_key,
    level_name,
)

from tests.servers import declare_task_queues
from tests.waiting import wait_until
from webhooks.celery_app import create_celery_app
from webhooks.queue import CeleryQueue, Queue, RabbitMQQueue, TaskCall, queue_for
from webhooks.settings import load_settings

pytestmark = pytest.mark.integration

CALLS = [
    TaskCall("webhooks.deliver", ("crm", "evt_1", '{"id":"evt_1","é":"\\u2028"}'), "('crm', 'evt_1')", task_id="t-0"),
    TaskCall("webhooks.deliver", ("crm", "evt_1", "{}"), "('crm', 'evt_1')", task_id="t-1", retries=7),
    TaskCall("webhooks.deliver_many", ("ep_1", [["evt_1", "{}"], ["evt_2", "{}"]]), "('ep_1', [...])", "t-3", 2),
    TaskCall("webhooks.fanout_many", ([["user_created", "evt_1", "{}"]],), "[('user_created', 'evt_1')]", "t-4"),
    TaskCall("webhooks.fanout_inbox", (), "()", task_id="t-2"),
]


@pytest.fixture
def rabbitmq_app(rabbitmq_server, redis_server):
    """An app on a fresh virtual host whose task queue and delayed-delivery queues are declared, as a
    worker's start declares them."""
    import webhooks.pipeline.tasks  # noqa: F401  # the task classes the app knows

    vhost = f"test-{uuid4().hex[:12]}"
    url = rabbitmq_server.add_vhost(vhost)
    app = create_celery_app(load_settings(broker_url=url, redis_url=redis_server.url))
    declare_task_queues(app)
    yield app, url, vhost
    app.pool.force_close_all()
    rabbitmq_server.delete_vhost(vhost)


def taken(url: str, queues: list[str]) -> list[dict]:
    """Every message in these queues, taken off them, as what a consumer sees: body, headers, properties and
    routing, without the delivery tag and count, which differ by nature."""
    messages = []
    with Connection(url) as connection:
        channel = connection.default_channel
        for queue in queues:
            while (message := channel.basic_get(queue, no_ack=True)) is not None:
                delivery = {
                    k: v for k, v in message.delivery_info.items() if k not in ("delivery_tag", "message_count")
                }
                messages.append({"body": message.body, "properties": dict(message.properties), "delivery": delivery})
    return sorted(messages, key=lambda message: message["properties"]["application_headers"]["id"])


def without_eta(messages: list[dict]) -> tuple[list[dict], list[datetime | None]]:
    """The messages without their ETA header (now plus the countdown, when each was built), and the ETAs."""
    etas = []
    for message in messages:
        eta = message["properties"]["application_headers"].pop("eta")
        etas.append(eta and datetime.fromisoformat(eta))
    return messages, etas


DELAYED = [level_name(level) for level in range(MAX_LEVEL + 1)]


@pytest.mark.parametrize("later", [False, True], ids=["now", "later"])
def test_its_messages_are_celerys_own_bodies_headers_properties_and_routing(rabbitmq_app, later):
    app, url, _ = rabbitmq_app
    queues = DELAYED if later else ["celery"]

    def sent(queue: Queue) -> list[dict]:
        if later:
            queue.send_later([(call, time.time() + 60) for call in CALLS])
        else:
            queue.send(CALLS)
        return taken(url, queues)

    (celerys, celery_etas), (ours, our_etas) = (
        without_eta(sent(CeleryQueue(app))),
        without_eta(sent(RabbitMQQueue(app))),
    )
    assert len(ours) == len(CALLS)
    assert ours == celerys  # the body's bytes included
    if later:  # held in RabbitMQ's delayed-delivery queues, a minute off
        assert {message["delivery"]["exchange"] for message in ours} == {"celery_delayed_27"}
        assert {message["delivery"]["routing_key"] for message in ours} == {calculate_routing_key(60, "celery")}
        assert all(abs((mine - theirs).total_seconds()) < 5 for mine, theirs in zip(our_etas, celery_etas, strict=True))
    else:
        assert ours[0]["delivery"] == {"exchange": "celery", "routing_key": "celery", "redelivered": False}
        assert our_etas == celery_etas == [None] * len(CALLS)


def test_the_app_sends_through_it_on_rabbitmq(rabbitmq_app):
    app, _, _ = rabbitmq_app
    assert type(queue_for(app)) is RabbitMQQueue


def test_a_batch_is_confirmed_on_one_channel_of_the_connection(rabbitmq_app):
    app, url, _ = rabbitmq_app
    queue = RabbitMQQueue(app)
    calls = [TaskCall("webhooks.deliver", ("crm", f"evt_{n}", "{}"), "()") for n in range(100)]
    queue.send(calls)
    queue.send(calls[:3])
    with app.connection_or_acquire() as connection:
        confirming = queue.channel_on(connection)
    assert confirming.published == 103 and not confirming.unanswered
    assert len(taken(url, ["celery"])) == 103


def test_messages_rabbitmq_refuses_raise_operational_error(rabbitmq_app, rabbitmq_server):
    app, url, vhost = rabbitmq_app
    rabbitmq_server.ctl(
        "set_policy",
        "-p",
        vhost,
        "--apply-to",
        "queues",
        "full",
        "^celery$",
        '{"max-length":1,"overflow":"reject-publish"}',
    )

    def full() -> bool:  # once the queue applies the policy, a publish is refused
        with Connection(url, transport_options={"confirm_publish": True}) as connection:
            try:
                connection.default_channel.basic_publish(amqp.Message("probe"), "", "celery")
            except amqp.exceptions.MessageNacked:
                return True
        return False

    wait_until(full, what="the full queue")
    calls = [TaskCall("webhooks.deliver", ("crm", f"evt_{n}", "{}"), "()") for n in range(5)]
    with pytest.raises(OperationalError, match="RabbitMQ refused 5 task messages"):
        RabbitMQQueue(app).send(calls)


def test_a_lost_connection_sends_the_unconfirmed_calls_again_on_a_new_one(rabbitmq_app):
    app, url, _ = rabbitmq_app
    queue = RabbitMQQueue(app)
    queue.send(CALLS[:1])
    with app.connection_or_acquire() as connection:  # the pool's one connection, then dropped under it
        lost = connection.connection
        lost.sock.close()
    queue.send(CALLS[1:])
    assert [message["properties"]["correlation_id"] for message in taken(url, ["celery"])] == sorted(
        str(call.task_id) for call in CALLS
    )
    with app.connection_or_acquire() as connection:
        assert connection.connection is not lost


def test_a_closed_broker_connection_is_an_operational_error(rabbitmq_app):
    app, _, _ = rabbitmq_app
    app.conf.task_publish_retry = False
    queue = RabbitMQQueue(app)
    with app.connection_or_acquire() as connection:
        connection.connection.sock.close()
    with pytest.raises(OperationalError):
        queue.send(CALLS)
