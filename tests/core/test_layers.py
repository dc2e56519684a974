"""audiocore's layers go one way, .py -> .pyx -> C (STYLE.md): the pure
Python helpers import no compiled module, and no module reaches for another
module's private names."""

import ast
import importlib.machinery
import subprocess
import sys
from pathlib import Path

import pytest

import audiocore

PACKAGE = Path(audiocore.__file__).parent
# Every extension module of the package as installed (the checkout's build
# or the wheel's), so a new one is covered without a list to keep.
COMPILED = sorted(
    {
        path.name.split(".")[0]
        for suffix in importlib.machinery.EXTENSION_SUFFIXES
        for path in PACKAGE.glob(f"*{suffix}")
    }
)
PURE = ["_validate", "_filters"]


def import_without_compiled(module: str) -> subprocess.CompletedProcess[str]:
    """Imports audiocore.`module` in a fresh interpreter where the package is
    bare (its __init__, which imports the kernels, does not run) and every
    extension module is blocked: importing one raises ImportError."""
    code = (
        "import sys, types\n"
        "package = types.ModuleType('audiocore')\n"
        f"package.__path__ = [{str(PACKAGE)!r}]\n"
        "sys.modules['audiocore'] = package\n"
        f"for name in {COMPILED!r}:\n"
        "    sys.modules['audiocore.' + name] = None\n"
        f"import audiocore.{module}\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_the_package_has_its_compiled_modules():
    assert {"_aec", "_convert", "_jitter", "_resample"} <= set(COMPILED)


@pytest.mark.parametrize("module", PURE)
def test_pure_python_helpers_import_nothing_compiled(module):
    result = import_without_compiled(module)
    assert result.returncode == 0, result.stderr


def test_blocking_the_compiled_modules_is_seen():
    # The check above can fail: a module that wraps a kernel does not import.
    result = import_without_compiled("resample")
    assert result.returncode != 0
    assert "None in sys.modules" in result.stderr


def private_names_used(path: Path) -> list[str]:
    """`module.name` for every private name that `path` takes from another
    audiocore module: imported by name, or read as an attribute of an
    imported audiocore module."""
    tree = ast.parse(path.read_text(), str(path))
    modules = {}  # local name -> audiocore module
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("audiocore"):
            for alias in node.names:
                qualified = f"{node.module}.{alias.name}"
                if (PACKAGE / f"{alias.name}.py").exists() or alias.name in COMPILED:
                    modules[alias.asname or alias.name] = qualified  # a module, private or not
                elif alias.name.startswith("_"):
                    found.append(qualified)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
        ):
            found.append(f"{modules[node.value.id]}.{node.attr}")
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_no_module_uses_another_modules_private_names(path):
    assert private_names_used(path) == []


def test_a_private_name_taken_is_seen(tmp_path):
    source = tmp_path / "user.py"
    source.write_text(
        "from audiocore import _jitter\n"
        "from audiocore._convert import _copy\n"
        "x = _jitter._STAT_FIELDS\n"
    )
    assert sorted(private_names_used(source)) == [
        "audiocore._convert._copy",
        "audiocore._jitter._STAT_FIELDS",
    ]
