"""The commit-msg hook (.pre-commit-config.yaml): a subject of at most 72
characters, then, if there is more, a blank line and the details.

`git log --oneline`, `git blame` and GitHub's history pages show the subject
alone; a subject that carries the details is cut off there.  Usage (git
passes the file): python scripts/check_commit_msg.py .git/COMMIT_EDITMSG
"""

from __future__ import annotations

import sys
from pathlib import Path

MAX_SUBJECT = 72


def problems(message: str) -> list[str]:
    """What is wrong with a commit message (git's comment lines ignored)."""
    lines = [line for line in message.splitlines() if not line.startswith("#")]
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return ["the message is empty"]
    found = []
    subject = lines[0]
    if len(subject) > MAX_SUBJECT:
        found.append(
            f"the subject is {len(subject)} characters, at most {MAX_SUBJECT} "
            f"fit: put the details in the body, after a blank line"
        )
    if len(lines) > 1 and lines[1].strip():
        found.append("the subject and the body need a blank line between them")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: check_commit_msg.py MESSAGE_FILE", file=sys.stderr)
        return 2
    found = problems(Path(argv[0]).read_text(encoding="utf-8"))
    for problem in found:
        print(f"commit message: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
