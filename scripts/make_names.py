"""Write src/backprop_lessons/data/names.txt: the first names microgpt learns
from.

Run from the repository root:

    python scripts/make_names.py                      # fetches the sdist with pip
    python scripts/make_names.py --sdist names-0.3.0.tar.gz

Source: the files `dist.female.first` and `dist.male.first` of the PyPI
package `names` 0.3.0 (Trey Hunner; the code is MIT licensed, and its README
states that these data files are public domain, derived from the 1990 US
Census).  They list 4,275 female and 1,219 male first names in upper case,
one per line with frequency columns.  This script keeps the first column,
lower-cases it, drops duplicates (names listed under both sexes) and writes
the names in alphabetical order, one per line: 5,163 names of 2 to 11
letters a-z.  The output is the same byte for byte on every run.

Only this script uses the network (through pip, when no --sdist is given);
the package reads the file it writes, never anything from the internet.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "names==0.3.0"
MEMBERS = (
    "names-0.3.0/names/dist.female.first",
    "names-0.3.0/names/dist.male.first",
)
OUT = Path("src/backprop_lessons/data/names.txt")


def download_sdist(folder: Path) -> Path:
    """The sdist of `names` 0.3.0, fetched by pip into `folder`."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            "-d",
            str(folder),
            PACKAGE,
        ],
        check=True,
    )
    return next(folder.glob("names-0.3.0.tar.gz"))


def first_names(sdist: Path) -> list[str]:
    """The unique first names of the two census files, lower case, sorted."""
    names = set()
    with tarfile.open(sdist) as tar:
        for member in MEMBERS:
            text = tar.extractfile(member).read().decode("ascii")
            names.update(
                line.split()[0].lower()
                for line in text.splitlines()
                if line.strip()
            )
    bad = sorted(n for n in names if not (n.isascii() and n.isalpha()))
    if bad:
        raise ValueError(
            f"make_names: unexpected names (not letters a-z): {bad[:5]}"
        )
    return sorted(names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sdist", type=Path, help="names-0.3.0.tar.gz, if already here"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sdist = args.sdist or download_sdist(Path(tmp))
        names = first_names(sdist)
    OUT.write_text("\n".join(names) + "\n", encoding="ascii")
    print(
        f"wrote {OUT}: {len(names):,} names, "
        f"{min(map(len, names))} to {max(map(len, names))} letters"
    )


if __name__ == "__main__":
    main()
