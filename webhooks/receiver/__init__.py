"""The receiving side: ``verify_request()`` for receiver code (``verify``), and the development
receiver that ``webhooks receive`` and the demo serve (``devserver``)."""

from webhooks.receiver.verify import verify_request

__all__ = ["verify_request"]
