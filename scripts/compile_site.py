"""Byte-compile a venv's installed packages, but the trees nothing here imports.

    python scripts/compile_site.py ENV

The Makefile's pip runs (.venv) and scripts/reader_runtime.py (the readers'
runtime) install with `--no-compile` and then run this.  Compiled files
must be there before the tests start: twenty processes a test launches at
once, finding torch uncompiled, each compiled it for themselves (a make
test once took 1,694 CPU-seconds instead of 878).  But pip compiles every
file it installs, and a third of them no process of make test, a notebook
or the book ever imports: other packages' own test suites, the model code
of transformers' hundreds of architectures (chapter 9 uses GPT-2's), and
torch's internal test suite.  Leaving them out: .venv 35 -> 22
CPU-seconds, the readers' runtime 22 -> 16.  A module left out still works:
Python compiles it when it is first imported, and keeps the result.
"""

from __future__ import annotations

import compileall
import re
import sys
import sysconfig
from pathlib import Path

#: Paths (searched anywhere in a file's path) that are not compiled.
SKIP = re.compile(
    r"/tests?/"
    r"|/transformers/models/(?!gpt2/|auto/|__init__)"
    r"|/torch/testing/_internal/"
)


def site_packages(env: Path) -> Path:
    """ENV's site-packages, by the layout of this interpreter's venvs."""
    relative = Path(sysconfig.get_path("purelib")).relative_to(sys.prefix)
    return env / relative


def compile_site(env: Path) -> None:
    where = site_packages(env)
    if not where.is_dir():
        sys.exit(f"compile_site: {where} is not a directory")
    if not compileall.compile_dir(where, quiet=1, rx=SKIP):
        sys.exit(f"compile_site: some files of {where} did not compile")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    compile_site(Path(sys.argv[1]))
