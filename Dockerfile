# The tokenledger image that docs/deploying.md deploys ("Kubernetes"): the wheel built from this checkout and
# installed, not editable, with the extras a deployment uses, by tools/install.sh, the script the wheel test
# (`make test-wheel`, in .ci/run) runs too. Build it from the checkout's top level:
#
#   docker build -t registry.example.com/tokenledger:0.1.0 .
#
# No image has been built on the project's machines (no Docker daemon there): what is tested is the same wheel
# installed by the same script on the same pins, then a day run from it. tests/test_packaging.py checks that this
# file keeps calling that script and copying what the wheel is built from.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# Stage 1: the wheel, from pyproject.toml and the folders it maps into the package (package-dir).
FROM ${PYTHON_IMAGE} AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY tokenledger/ tokenledger/
COPY assets/ assets/
COPY pipelines/ pipelines/
COPY sql/ sql/
COPY data_contracts/ data_contracts/
RUN python -m pip wheel --no-cache-dir --no-deps -w /dist .

# Stage 2: the wheel installed into a virtualenv, /opt/tokenledger, on the pinned set (constraints.txt).
FROM ${PYTHON_IMAGE}
COPY --from=wheel /dist/ /tmp/dist/
COPY constraints.txt tools/install.sh /tmp/install/
RUN PIP_NO_CACHE_DIR=1 PYTHON=python3 sh /tmp/install/install.sh /opt/tokenledger /tmp/dist/tokenledger-*.whl \
        postgres,s3,celery,k8s /tmp/install/constraints.txt \
    && rm -rf /tmp/dist /tmp/install
# The code location is a module of the installed package (tokenledger.pipelines.definitions); the image holds no
# checkout. numba's compiled what-if replay is cached under /tmp, writable by any user a pod runs as.
ENV PATH=/opt/tokenledger/bin:$PATH \
    NUMBA_CACHE_DIR=/tmp/numba-cache
RUN useradd --create-home --uid 10001 tokenledger
USER tokenledger
WORKDIR /home/tokenledger
CMD ["tokenledger", "--help"]
