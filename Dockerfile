# The image every service of docker-compose.yml runs: the package and its console script, as a non-root user.
# EXTRAS names the extras a service needs (web, flower); a worker needs none: the base install.
FROM python:3.11-slim
ARG EXTRAS=""

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY webhooks ./webhooks
RUN pip install ".${EXTRAS:+[$EXTRAS]}" && useradd --system --uid 10001 --home-dir /app webhooks
COPY config ./config

USER webhooks
CMD ["celery", "-A", "webhooks", "worker", "--loglevel", "INFO"]
