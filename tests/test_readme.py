"""The README's list of supported commands is generated from the command table: it must be
up to date (regenerate with `python3 tools/gen_readme.py`)."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_readme_command_list_matches_the_table():
    r = subprocess.run([sys.executable, str(ROOT / "tools/gen_readme.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_command_table_matches_its_generator_list():
    specs = ROOT.parent / "shared" / "commands"
    if not specs.is_dir():
        import pytest
        pytest.skip("../shared/commands not present")
    r = subprocess.run([sys.executable, str(ROOT / "tools/gen_commands.py"), "--check"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
