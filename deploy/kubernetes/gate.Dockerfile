# The health gate's image (validation-gate-job.yaml): NVIDIA's DCGM image (dcgmi, nv-hostengine) with
# perftest (ib_write_bw), curl (cordons through the API) and lockstep (`lockstep validate`).
#   docker build -f deploy/kubernetes/gate.Dockerfile -t ghcr.io/lockstep-telemetry/lockstep-gate:0.1.0 .
FROM nvcr.io/nvidia/cloud-native/dcgm:4.1.1-2-ubuntu22.04
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        perftest curl python3-venv && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY lockstep lockstep
COPY exporters exporters
COPY analytics analytics
COPY dashboards dashboards
COPY alerts alerts
COPY simulator simulator
COPY validation validation
RUN python3 -m venv /opt/lockstep && /opt/lockstep/bin/pip install --no-cache-dir . && rm -rf /src \
    && ln -s /opt/lockstep/bin/lockstep /usr/local/bin/lockstep
