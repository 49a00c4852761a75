"""Every exception the package raises, rooted at :class:`WebhooksError`.

The tree::

    WebhooksError                       catch-all for callers
    ├── ConfigurationError              bad settings; unreadable or invalid YAML registry
    ├── InvalidEventError (ValueError)  an event breaks the spec (publish_event(), verify_request())
    ├── PublishError                    the event could not be handed to the broker
    ├── RegistryError                   a registry refused an operation
    │   ├── EndpointNotFoundError       no endpoint has that id
    │   ├── DuplicateEndpointError      an endpoint with that id exists already
    │   ├── InvalidEndpointError (ValueError)  a URL, event name or other endpoint field is invalid
    │   ├── ReadOnlyRegistryError       the registry (YAML) cannot be written
    │   └── RegistryUnavailableError    the registry's Redis cannot be reached: tasks retry
    ├── TenantError                     a tenant operation was refused
    │   ├── TenantNotFoundError         no tenant has that id (no record and no endpoints)
    │   └── InvalidTenantError (ValueError)  a tenant id, rate limit or other field is invalid
    ├── SignatureError (ValueError)     verify() rejected a signature header
    ├── DeliveryLogError                the delivery log's Redis cannot be reached
    │   └── DeliveryNotFoundError       no delivery has that id (or it expired)
    ├── RedeliveryError                 a delivery cannot be sent again as asked
    ├── PortalLinkError                 a tenant's portal link is expired, used, or not this service's
    └── DeliveryError                   one delivery attempt did not succeed
        ├── RetryableDeliveryError      non-2xx, 3xx or no response: Celery retries it
        └── PermanentDeliveryError      endpoint gone, disabled or unsafe: never retried

Messages are complete sentences that name the offending value, because the CLI and
the settings page show them to operators as they are.
"""

from __future__ import annotations


class WebhooksError(Exception):
    """Root of every error raised by this package."""


class ConfigurationError(WebhooksError):
    """Raised at start when settings or the YAML registry are invalid."""


class InvalidEventError(WebhooksError, ValueError):
    """Raised by publish_event() when the event does not match the spec; nothing is enqueued.

    Also raised by verify_request() when a request whose signature verified has a body that is not a JSON object.
    """


class PublishError(WebhooksError):
    """Raised by publish_event() when the broker cannot be reached; nothing is enqueued."""


class RegistryError(WebhooksError):
    """Raised when a registry refuses an operation."""


class EndpointNotFoundError(RegistryError):
    """Raised when no endpoint has the given id."""

    def __init__(self, endpoint_id: str) -> None:
        super().__init__(f"Endpoint {endpoint_id!r} does not exist.")
        self.endpoint_id = endpoint_id


class DuplicateEndpointError(RegistryError):
    """Raised when an endpoint id is used twice."""


class InvalidEndpointError(RegistryError, ValueError):
    """Raised when an endpoint would get a bad URL, unknown event names or another invalid field; nothing is written."""


class ReadOnlyRegistryError(RegistryError):
    """Raised when a write is asked of a registry that cannot be written (the YAML file)."""


class RegistryUnavailableError(RegistryError):
    """Raised when the Redis holding the registry does not answer; Celery retries the task that met it."""


class TenantError(WebhooksError):
    """Raised when a tenant operation is refused."""


class TenantNotFoundError(TenantError):
    """Raised when no tenant has the given id: it has neither a record nor endpoints."""

    def __init__(self, tenant: str) -> None:
        super().__init__(f"Tenant {tenant!r} does not exist: it has no record and no endpoints.")
        self.tenant = tenant


class InvalidTenantError(TenantError, ValueError):
    """Raised when a tenant would get an invalid id, rate limit or description; nothing is written."""


class SignatureError(WebhooksError, ValueError):
    """Raised by verify() when a signature header is malformed, stale or does not match.

    Carries the offending ``header``; never the secret.
    """

    def __init__(self, message: str, header: str | None = None) -> None:
        super().__init__(message)
        self.header = header


class DeliveryLogError(WebhooksError):
    """Raised when the delivery log cannot be read or written."""


class DeliveryNotFoundError(DeliveryLogError):
    """Raised when no delivery has the given id: it never existed, or it aged out of the log."""

    def __init__(self, delivery_id: str) -> None:
        super().__init__(
            f"Delivery {delivery_id!r} is not in the delivery log: it does not exist or is older than its retention."
        )
        self.delivery_id = delivery_id


class RedeliveryError(WebhooksError):
    """Raised when a delivery cannot be sent again as asked (it was delivered, or is still being attempted)."""


class PortalLinkError(WebhooksError):
    """Raised when a portal link cannot open a session: expired, used already, changed, or signed with another key."""


class DeliveryError(WebhooksError):
    """Raised when one delivery attempt did not succeed."""

    def __init__(self, message: str, *, endpoint_id: str, attempt: int, status_code: int | None = None) -> None:
        super().__init__(message)
        self.endpoint_id = endpoint_id
        self.attempt = attempt
        self.status_code = status_code

    def __repr__(self) -> str:
        # Flower and task events show repr(exc): make a retry's reason read as a sentence there.
        return f"{type(self).__name__}: {self}"

    def __reduce__(self) -> tuple[object, ...]:
        # Celery pickles or JSON-encodes exceptions for task events; keep the message intact.
        return (_rebuild_delivery_error, (type(self), str(self), self.endpoint_id, self.attempt, self.status_code))


class RetryableDeliveryError(DeliveryError):
    """The receiver answered non-2xx (3xx included) or did not answer: spec section 7 says retry."""


class PermanentDeliveryError(DeliveryError):
    """The delivery cannot succeed by retrying: endpoint removed, disabled, or its address is unsafe."""


def _rebuild_delivery_error(
    cls: type[DeliveryError], message: str, endpoint_id: str, attempt: int, status_code: int | None
) -> DeliveryError:
    return cls(message, endpoint_id=endpoint_id, attempt=attempt, status_code=status_code)
