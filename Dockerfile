# graymq image: one `graymq` entry point for the name server, the broker and the ops CLI.
#   docker build -t graymq:0.1.0 .
#   docker run --rm graymq:0.1.0 nameserver migrate --db postgresql+psycopg://...
# The Helm chart (helm/graymq) always sets the command; the default CMD only prints usage.

ARG PYTHON_IMAGE=python:3.11-slim

# --- builder: a wheel of this tree, installed with the server extra into a venv ---
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# gcc builds the compiled hot path (graymq.protocol._speedups) into the wheel; the runtime stage needs no compiler.
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null \
 && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/graymq
COPY pyproject.toml setup.py README.md ./
COPY protocol ./protocol
COPY core ./core
COPY nameserver_api ./nameserver_api
COPY broker_ext ./broker_ext
COPY nameserver ./nameserver
COPY client ./client
COPY gray_controller ./gray_controller
COPY runbooks ./runbooks
COPY migrations ./migrations
COPY bench ./bench
COPY devkit ./devkit
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && /opt/graymq/bin/pip install "$(ls /wheels/graymq-*.whl)[server,fast]" \
 && /opt/graymq/bin/python -c "from graymq.protocol import native; assert native.SPEEDUPS, native.REASON" \
 && /opt/graymq/bin/python -m compileall -q /opt/graymq

# --- runtime: the venv only, run as an unprivileged numeric user ---
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="graymq" \
      org.opencontainers.image.description="Gray-release messaging: name server, broker and cutover CLI" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/graymq/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN groupadd --system --gid 10001 graymq \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/graymq --shell /usr/sbin/nologin graymq \
 && mkdir -p /var/lib/graymq \
 && chown 10001:10001 /var/lib/graymq
COPY --from=builder /opt/graymq /opt/graymq
USER 10001:10001
WORKDIR /var/lib/graymq
# 9876 name server REST API, 10911 broker protocol (TCP).
EXPOSE 9876 10911
ENTRYPOINT ["graymq"]
CMD ["--help"]
