"""The commit-msg hook's check (scripts/check_commit_msg.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_commit_msg.py"
spec = importlib.util.spec_from_file_location("check_commit_msg", SCRIPT)
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)


def test_a_short_subject_with_a_body_passes():
    assert check.problems("Fix relu's NaN rule\n\nDetails here.\n# comment") == []


def test_a_long_subject_is_refused_with_its_length():
    (problem,) = check.problems("x" * 73 + "\n")
    assert "73 characters, at most 72" in problem


def test_the_body_needs_a_blank_line_and_the_message_text():
    assert check.problems("Subject\nbody at once") == [
        "the subject and the body need a blank line between them"
    ]
    assert check.problems("# only git's comments\n\n") == ["the message is empty"]


def test_the_script_exits_non_zero_on_a_bad_message(tmp_path):
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text("y" * 100 + "\n")
    done = subprocess.run(
        [sys.executable, SCRIPT, message], capture_output=True, text=True
    )
    assert done.returncode == 1 and "100 characters" in done.stderr
    message.write_text("Short subject\n")
    assert subprocess.run([sys.executable, SCRIPT, message]).returncode == 0
