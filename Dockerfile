# DIGITS Core in a container: `digits serve` on 0.0.0.0:5000 with /data and /jobs volumes.
#
#   docker build -t digits-core .
#   docker run -p 8888:5000 -v ~/data:/data -v ~/digits-jobs:/jobs -e DIGITS_AUTH_TOKEN=change-me digits-core
#
# Bound beyond loopback, the server refuses to start without a token (DIGITS_AUTH_TOKEN).
# GPU variant (NVIDIA Container Toolkit on the host):
#   docker build -t digits-core:cuda \
#       --build-arg BASE_IMAGE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04 \
#       --build-arg TENSORFLOW="tensorflow[and-cuda]>=2.16" .
#   docker run --gpus all -p 8888:5000 -v ~/data:/data -v ~/digits-jobs:/jobs -e DIGITS_AUTH_TOKEN=... digits-core:cuda
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

ARG TENSORFLOW="tensorflow>=2.16"
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/digits \
    PATH=/opt/digits/bin:$PATH \
    DIGITS_JOBS_DIR=/jobs

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# The CUDA base images have no Python; the python: images do.
# hadolint ignore=DL3008
RUN if ! command -v python3 >/dev/null; then \
        apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv /opt/digits \
    && useradd --create-home --uid 1000 digits \
    && mkdir -p /data /jobs && chown digits:digits /data /jobs

WORKDIR /src
COPY pyproject.toml README.md ./
COPY digits_core ./digits_core
COPY plugins ./plugins
COPY compat ./compat
# hadolint ignore=DL3013
RUN pip install --upgrade pip setuptools wheel \
    && pip install "${TENSORFLOW}" . \
        ./plugins/data_images ./plugins/data_sunnybrook ./plugins/data_dicomweb ./plugins/data_volumes \
        ./plugins/view_classification ./plugins/view_segmentation ./plugins/view_detection ./plugins/view_generic \
        ./plugins/networks_backbones \
        ./compat/digits6 \
    && digits plugins

USER 1000
WORKDIR /data
VOLUME ["/data", "/jobs"]
EXPOSE 5000
HEALTHCHECK --interval=30s --timeout=5s CMD ["python3", "-c", "import socket; socket.create_connection(('127.0.0.1', 5000), 4)"]
ENTRYPOINT ["digits", "serve", "--host", "0.0.0.0", "--port", "5000", "--data-root", "/data", "--data-root", "/jobs"]
CMD []
