"""Run every script of the ``examples/`` gallery, as a user would, and require success.

Each example asserts what it claims (one compilation, Thompson sampling ahead of
greedy, ...), so a zero exit status checks the claims too. New examples are picked up
by the glob.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


def test_examples_are_found():
    assert EXAMPLES, "no examples/*.py found"


@pytest.mark.parametrize("script", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_example_runs(script, tmp_path):
    env = {**os.environ, "MPLBACKEND": "Agg"}
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"{script.name} failed:\n{result.stdout}\n{result.stderr}"
    assert result.stdout.strip(), f"{script.name} printed nothing"


#: Import names of the distributions a user has after the README's first command.
_IMPORT_NAME = {"scikit-learn": "sklearn"}


def _installed_by_first_command() -> set[str]:
    """Top-level modules of skbong's dependencies plus its ``examples`` extra."""
    import re

    tomllib = pytest.importorskip("tomllib")  # the standard library from Python 3.11

    project = tomllib.loads((EXAMPLES[0].parents[1] / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + project["optional-dependencies"]["examples"]
    names = {re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0] for req in requirements}
    return {_IMPORT_NAME.get(name, name) for name in names} | {"skbong"}


@pytest.mark.parametrize("script", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_example_needs_only_what_the_first_command_installs(script):
    """Every import of an example is the standard library, a dependency or the
    ``examples`` extra that the README's first command installs."""
    import ast

    tree = ast.parse(script.read_text())
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 0}
    allowed = _installed_by_first_command() | set(sys.stdlib_module_names)
    missing = {m for m in modules if m.split(".")[0] not in allowed}
    assert not missing, f"{script.name} imports {sorted(missing)}, which the README's first command does not install"
