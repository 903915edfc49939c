#!/usr/bin/env bash
# Gradescope's setup script: run once, as root, when Gradescope builds the
# autograder's image from autograder.zip (`make gradescope`), whose files it
# unpacks into /autograder/source.  It installs Python 3.11 or newer in a
# virtual environment, /autograder/venv, with the book's package from the
# wheel beside this script and the extras the grader and the chapters need
# (grade: nbclient, nbformat, ipykernel; torch; hf: transformers and
# safetensors, for chapter 9; threadpoolctl, which chapter 9 imports), and
# graphviz, whose `dot` draws the chapters' graphs.
#
# GRADER_VENV moves the environment and TORCH_INDEX names the index PyTorch
# comes from (default: PyTorch's CPU builds; PyPI's default Linux wheel
# brings CUDA's libraries, gigabytes that grading on a CPU never uses).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
venv=${GRADER_VENV:-/autograder/venv}
torch_index=${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
export DEBIAN_FRONTEND=noninteractive

apt-get update -q
apt-get install -y -q --no-install-recommends graphviz python3-venv python3-pip

python=
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null &&
     "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    python=$candidate
    break
  fi
done
if [ -z "$python" ]; then  # Ubuntu 22.04's python3 is 3.10
  apt-get install -y -q --no-install-recommends python3.11 python3.11-venv
  python=python3.11
fi

"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet --index-url "$torch_index" torch
wheel=$(ls "$here"/backprop_lessons-*.whl)
"$venv/bin/pip" install --quiet "$wheel[grade,torch,hf]" threadpoolctl
"$venv/bin/python" -m backprop_lessons.grade --help >/dev/null
echo "setup.sh: the grader is installed in $venv ($("$venv/bin/python" --version))"
