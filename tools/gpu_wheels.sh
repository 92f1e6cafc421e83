#!/usr/bin/env bash
# Fetch into .whl/ (git-ignored) the wheels a lent GPU machine lacks to run tools/gpu_run.py:
# nbclient, ipykernel, ipywidgets, nbformat and what they need, for CPython 3.12 on x86-64 Linux, and
# cloudpickle (trips.hardware sends a notebook's functions with it to the process Nsight Compute profiles).
# torch, triton, numpy and matplotlib are already there and are left out, with the CUDA wheels.
#   tools/gpu_wheels.sh          (on a machine with pip and a package index)
# On the GPU machine:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#       --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEST=.whl

rm -rf "$DEST" && mkdir -p "$DEST"
"$PY" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$DEST" nbclient ipykernel ipywidgets nbformat cloudpickle

# Drop what the GPU machine has already (and must keep: its CUDA builds).
shopt -s nullglob nocaseglob
for w in "$DEST"/{torch,triton,numpy,matplotlib}-*.whl "$DEST"/nvidia_*.whl; do
    echo "dropping $(basename "$w")"; rm -f "$w"
done

# One version of each project: two would stop the install on the other side.
dups=$(ls "$DEST"/*.whl | xargs -n1 basename | cut -d- -f1 | tr 'A-Z.-' 'a-z__' | sort | uniq -d)
if [ -n "$dups" ]; then echo "more than one version of: $dups" >&2; exit 1; fi

n=$(ls "$DEST"/*.whl | wc -l)
size=$(du -sk "$DEST" | cut -f1)
echo "$n wheels, $((size / 1024)) MiB in $DEST/"
if [ "$size" -gt $((60 * 1024)) ]; then echo "over 60 MiB: too big to carry" >&2; exit 1; fi
