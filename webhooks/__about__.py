__version__ = "0.1.0"
#: The name to install it by (``pip install webhooks-delivery``); ``webhooks`` on the package index is another project.
DISTRIBUTION = "webhooks-delivery"


def install_command(extra: str) -> str:
    """The command that installs ``extra``, as error messages say it."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"
