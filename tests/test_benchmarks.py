"""The benchmark scripts still name what skbong has.

The scripts in ``benchmarks/`` are run by hand, so a renamed or removed function they import
or patch goes unnoticed until their next run. Running them here would cost minutes; reading
them costs nothing. This checks names only, not signatures: a spy whose arguments drift
(``filter_consistency.py`` once) still needs a run to show.
"""

import ast
import importlib
import types
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py"))


def _resolve(module: types.ModuleType, name: str):
    """``module.name``, an attribute or a submodule; None when neither exists."""
    if hasattr(module, name):
        return getattr(module, name)
    try:
        return importlib.import_module(f"{module.__name__}.{name}")
    except ImportError:
        return None


def _dotted(node: ast.Attribute) -> list[str]:
    """``a.b.c`` as ``["a", "b", "c"]``; empty unless the chain starts at a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id] + parts[::-1] if isinstance(node, ast.Name) else []


def _missing_names(tree: ast.Module) -> list[str]:
    """What the script imports from skbong, or reads from a skbong module it bound to a name,
    that skbong does not have."""
    missing, modules = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "skbong":
                    module = importlib.import_module(alias.name)
                    # read as "skbong.core.name" after "import skbong.core", "c.name" after "... as c"
                    modules[alias.asname or alias.name] = module
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "skbong":
            module = importlib.import_module(node.module)
            for alias in node.names:
                found = _resolve(module, alias.name)
                if found is None:
                    missing.append(f"{node.module}.{alias.name}")
                elif isinstance(found, types.ModuleType):
                    modules[alias.asname or alias.name] = found
    for node in ast.walk(tree):
        parts = _dotted(node) if isinstance(node, ast.Attribute) else []
        for bound, module in modules.items():
            head = bound.split(".")
            if parts[: len(head)] != head or len(parts) == len(head):
                continue
            found = module
            for depth in range(len(head), len(parts)):
                if not isinstance(found, types.ModuleType):
                    break  # an attribute of a class or function: not checked
                found = _resolve(found, parts[depth])
                if found is None:
                    missing.append(".".join(parts[: depth + 1]))
                    break
    return sorted(set(missing))


def test_benchmarks_are_found():
    assert len(BENCHMARKS) > 10, "benchmarks/*.py not found"


@pytest.mark.parametrize("script", BENCHMARKS, ids=[path.name for path in BENCHMARKS])
def test_a_benchmark_names_only_what_skbong_has(script):
    missing = _missing_names(ast.parse(script.read_text()))
    assert not missing, f"{script.name} uses {missing}, which skbong no longer has"


def test_a_missing_name_is_found():
    """The check itself: a removed helper, imported or read through its module, is named."""
    source = (
        "import skbong._estimators as estimators\n"
        "from skbong.core import _filter, run_filter, no_such_function\n"
        "from skbong.core._curvature import _dense_factors\n"
        "estimators.BONGClassifier, estimators.no_such_name, _filter.run_filter, _filter.gone.deeper\n"
        "run_filter.__doc__\n"
    )
    assert _missing_names(ast.parse(source)) == [
        "_filter.gone",
        "estimators.no_such_name",
        "skbong.core._curvature._dense_factors",
        "skbong.core.no_such_function",
    ]
