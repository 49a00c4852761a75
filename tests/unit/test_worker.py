"""The worker's wiring (webhooks/worker.py): attached to the app with the tasks, never with the app alone."""

from __future__ import annotations


def test_the_tasks_attach_the_workers_bootsteps_to_the_app():
    import webhooks.pipeline.tasks  # noqa: F401
    from webhooks.celery_app import app
    from webhooks.pipeline.housekeeping import Housekeeping

    added = app.steps["worker"]
    assert Housekeeping in added
    assert any(step.__name__ == "StartupCheck" for step in added)


def test_a_ready_worker_freezes_its_start_up_objects_out_of_the_collectors_count():
    import gc

    from celery.signals import worker_process_init, worker_ready

    import webhooks.worker  # noqa: F401  # connects the handlers

    for signal in (worker_ready, worker_process_init):
        assert gc.get_freeze_count() == 0
        signal.send(sender=None)
        try:
            assert gc.get_freeze_count() > 0
        finally:
            gc.unfreeze()


def test_a_starting_worker_limits_glibcs_malloc_arenas_before_its_pool_starts(monkeypatch):
    import ctypes

    from celery.signals import worker_init, worker_process_init

    import webhooks.worker

    limits = []

    class Libc:
        def __init__(self, name):
            assert name == "libc.so.6"

        def mallopt(self, option, value):
            limits.append((option, value))

    monkeypatch.setattr(ctypes, "CDLL", Libc)
    for signal in (worker_init, worker_process_init):
        signal.send(sender=None)
    assert limits == [(-8, webhooks.worker.MALLOC_ARENAS)] * 2  # M_ARENA_MAX
