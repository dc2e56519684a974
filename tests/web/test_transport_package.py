"""web/sdk/ as the npm package @audiocore/chat-transport: its package.json,
what ``npm pack`` puts in the tarball, and its hand-written declarations
type-checked (``tsc --noEmit`` on tests/web/js/types/consumer.ts, an app's
use of it) against ai 6 and 7. The tarball installed into a scratch app and
run against the real server is .ci/transport-package's."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from test_ai_sdk import JS, install_npm_packages
from web_helpers import ROOT, missing

SDK = ROOT / "web" / "sdk"


def test_the_package_json() -> None:
    package = json.loads((SDK / "package.json").read_text())
    assert package["name"] == "@audiocore/chat-transport"
    assert package["type"] == "module"
    assert package["peerDependencies"] == {"ai": ">=6 <8"}
    assert package["exports"]["."] == {
        "types": "./chat-transport.d.ts",
        "default": "./chat-transport.js",
    }
    assert "dependencies" not in package and "scripts" not in package, "no build step"
    for name in package["files"]:
        assert (SDK / name).is_file(), name


def test_the_tarball_carries_every_module_the_transport_imports() -> None:
    npm = shutil.which("npm")
    if npm is None:
        missing("npm is not installed (Debian package npm)")
    result = subprocess.run(
        [npm, "pack", "--dry-run", "--json", str(SDK)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    packed = {entry["path"] for entry in json.loads(result.stdout)[0]["files"]}
    # The transport's relative imports, and theirs: the tarball is self-contained.
    assert packed == {
        "package.json",
        "README.md",
        "chat-transport.js",
        "chat-transport.d.ts",
        "session.js",
        "reconnect.js",
        "pcm.js",
        "wav.js",
    }
    for module in ("chat-transport.js", "session.js", "reconnect.js", "pcm.js", "wav.js"):
        for line in (SDK / module).read_text().splitlines():
            if line.startswith("import ") and ' from "./' in line:
                assert line.split('"./')[1].rstrip('";') in packed, (module, line)


@pytest.mark.parametrize("major", ["ai6", "ai7"])
def test_the_declarations_type_check_against_ai(major: str) -> None:
    if shutil.which("node") is None:
        missing("node is not installed (Debian package nodejs)")
    install_npm_packages()
    tsc = JS / "node_modules" / ".bin" / "tsc"
    result = subprocess.run(
        [str(tsc), "-p", str(JS / "types" / f"tsconfig.{major}.json")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
