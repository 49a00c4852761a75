"""``webhooks serve``: the settings page on Werkzeug's development server.

In production run it under gunicorn instead: ``gunicorn 'webhooks.ops.web:create_app()'`` (see the Procfile).
"""

from __future__ import annotations

import click

from webhooks.ops.cli.base import main, optional, pass_services
from webhooks.ops.ports import reserve_port
from webhooks.ops.services import Services


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535), help="Port to listen on.")
@pass_services
def serve(services: Services, host: str, port: int) -> None:
    """Serve the settings page (endpoints, secrets, deliveries) for development."""
    web, serving = optional("webhooks.ops.web", "web"), optional("werkzeug.serving", "web")
    page_socket = reserve_port(port, host)  # before the app is built: a busy port is the first thing said
    try:
        app = web.create_app(services.settings, services.registry, services.log)
        server = serving.make_server(host, port, app, threaded=True, fd=page_socket.fileno())
        click.echo(f"Settings page on http://{host}:{port}/ (sign in with WEBHOOKS_ADMIN_PASSWORD)")
        server.serve_forever()
    finally:
        page_socket.close()
