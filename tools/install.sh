#!/bin/sh
# Install a tokenledger wheel, not editable, into a new virtualenv: the one install the container image runs
# (Dockerfile) and the wheel test runs (tools/wheel_check.py, `make test-wheel`), so what the image does is tested.
#
#   tools/install.sh VENV WHEEL EXTRAS CONSTRAINTS
#   tools/install.sh /opt/tokenledger dist/tokenledger-0.1.0-py3-none-any.whl postgres,s3,celery,k8s constraints.txt
#
# VENV is created with $PYTHON (python3 unless set) and must not exist yet. EXTRAS is a comma-separated list of the
# wheel's extras ("" for none). Every dependency comes from CONSTRAINTS (the pinned set, constraints.txt) and as a
# wheel only: a pin without a wheel for this Python fails here, instead of compiling from source in the image.
# pip's cache is used unless the environment turns it off (the Dockerfile sets PIP_NO_CACHE_DIR=1).
set -eu

if [ "$#" -ne 4 ]; then
  echo "usage: $0 VENV WHEEL EXTRAS CONSTRAINTS" >&2
  exit 2
fi
venv=$1 wheel=$2 extras=$3 constraints=$4
python=${PYTHON:-python3}

if [ -e "$venv" ]; then
  echo "$0: $venv exists: the install goes into a new virtualenv" >&2
  exit 2
fi
for f in "$wheel" "$constraints"; do
  if [ ! -f "$f" ]; then
    echo "$0: no file $f" >&2
    exit 2
  fi
done

requirement=$wheel
if [ -n "$extras" ]; then
  requirement="$wheel[$extras]"
fi

"$python" -m venv "$venv"
# The pip that resolved constraints.txt (the interpreters' bundled pips differ: 23.2 to 24.x).
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'pip==26.3'
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
  -c "$constraints" "$requirement"
# Every installed distribution's requirements are met.
"$venv/bin/python" -m pip check
"$venv/bin/tokenledger" --help >/dev/null
