# The image every service of docker-compose.yml runs: the package and its console script, as a non-root user.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY webhooks ./webhooks
RUN pip install . && useradd --system --uid 10001 --home-dir /app webhooks
COPY config ./config

USER webhooks
CMD ["celery", "-A", "webhooks", "worker", "--loglevel", "INFO"]
