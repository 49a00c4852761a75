"""The private servers of ``tests.servers``: ours alone, and gone when stopped."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import kombu
import pytest

from tests.integration.conftest import available
from tests.servers import running_rabbitmq_server
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


def test_a_fresh_virtual_host_on_our_rabbitmq_takes_a_quorum_queue(rabbitmq_server):
    url = rabbitmq_server.add_vhost("servers-test")
    try:
        with kombu.Connection(url) as connection:
            queue = kombu.Queue("q", queue_arguments={"x-queue-type": "quorum"})
            queue(connection.default_channel).declare()
            with connection.Producer() as producer:
                producer.publish({"hello": 1}, routing_key="q", declare=[queue])
            message = wait_until(lambda: queue(connection.default_channel).get(no_ack=True), what="the message")
            assert message.payload == {"hello": 1}
        assert "q\tquorum" in rabbitmq_server.ctl("list_queues", "-p", "servers-test", "name", "type")
    finally:
        rabbitmq_server.delete_vhost("servers-test")


def test_our_rabbitmq_node_registers_with_its_own_epmd_and_leaves_nothing_running(tmp_path):
    with available(running_rabbitmq_server(tmp_path)) as server:
        epmd_port = server.env["ERL_EPMD_PORT"]
        names = subprocess.run(
            ["epmd", "-port", epmd_port, "-names"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
        assert f"name {server.node.split('@')[0]} at port {server.env['RABBITMQ_DIST_PORT']}" in names
        pids = _processes_mentioning(str(tmp_path))
        assert server.process.pid in pids and len(pids) > 1  # the script and the Erlang VM, at least
    assert _processes_mentioning(str(tmp_path)) == set()  # the node, its script and its epmd (HOME is there)
    assert not _epmd_answers(epmd_port)


def _processes_mentioning(text: str) -> set[int]:
    """Processes whose command line or environment mentions ``text`` (our node's are all under its directory)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                seen = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
            except OSError:
                continue
            if text.encode() in seen.replace(b"\0", b" "):
                found.add(int(entry.name))
    return found


def _epmd_answers(port: str) -> bool:
    completed = subprocess.run(["epmd", "-port", port, "-names"], capture_output=True, timeout=10, check=False)
    return completed.returncode == 0
