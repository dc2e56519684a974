"""The server's floor plan, held by its imports (docs/architecture.md).

``audiocore_server/`` is a stack of wings (packages), each importing only itself and
the wings below it; on top, the composition root. Read from the code's own
``import`` statements (relative and absolute), module by module, so a
crossing shows here before it shows anywhere else.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parents[2] / "audiocore_server"
WEB = SERVER.parent / "web"

# Bottom to top. ``settings`` is the floor every wing stands on; the
# composition root (runtime → app → __main__) is the roof.
WINGS = [
    "settings",
    "wire",
    "ops",
    "storage",
    "gate",
    "models",
    "audio",
    "tools",
    "turns",
    "tasks",
    "memory",
    "offline",
    "agent",
    "live",
    "phone",
    "http",
    "runtime",
    "app",
    "embed",
    "__main__",
    "__init__",
]
ROOT_MODULES = {"settings", "runtime", "app", "embed", "__main__", "__init__"}
PROVIDERS = {"models.gemini", "models.openai_realtime", "models.openai_connection"}
SURFACES = {
    "live.connection",
    "live.run_live",
    "http.session_rest",
    "http.chat",
    "http.memory_rest",
    "http.token_route",
    "phone.incoming",
    "phone.stream",
}
MAX_LINES = 600  # a module past this is doing a second job


def _modules() -> dict[str, Path]:
    """``live.connection`` → its file; a package is its ``__init__``."""
    modules = {}
    for path in SERVER.rglob("*.py"):
        parts = path.relative_to(SERVER).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)
        modules[name] = path
    return modules


def _imports() -> dict[str, set[str]]:
    """server module → the server modules it imports (``from ..wire import
    chunks`` names ``wire.chunks``; ``from ..wire.fields import X`` names
    ``wire.fields``)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py" and name != "__init__"
        package = name if is_package else (name.rsplit(".", 1)[0] if "." in name else "")
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = [p for p in package.split(".") if p]
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module == "server" or (node.module or "").startswith("audiocore_server."):
                target = node.module.removeprefix("server").removeprefix(".")  # type: ignore[union-attr]
            else:
                continue
            found.add(target or "__init__")
            found.update(f"{target}.{a.name}" if target else a.name for a in node.names)
        graph[name] = found
    return {m: {d for d in deps if d in modules and d != m} for m, deps in graph.items()}


def _wing(module: str) -> str:
    return module.split(".", 1)[0]


GRAPH = _imports()


def test_every_module_is_in_a_wing_or_the_root() -> None:
    stray = [m for m in GRAPH if _wing(m) not in WINGS]
    assert stray == [], f"modules outside the wings {WINGS}: {stray}"
    flat = [m for m in GRAPH if "." not in m and m not in ROOT_MODULES]
    flat = [m for m in flat if not (SERVER / m).is_dir()]
    assert flat == [], f"flat modules in audiocore_server/ that belong in a wing: {flat}"


def test_the_server_imports_have_no_cycle() -> None:
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for dep in sorted(GRAPH[module]):
            assert state.get(dep) != 1, f"import cycle: {' → '.join([*path, module, dep])}"
            if dep not in state:
                visit(dep, [*path, module])
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [])


def test_no_wing_imports_one_above_it() -> None:
    rank = {wing: i for i, wing in enumerate(WINGS)}
    upward = sorted(
        f"{module} → {dep}"
        for module, deps in GRAPH.items()
        for dep in deps
        if rank[_wing(dep)] > rank[_wing(module)]
    )
    assert upward == []


def test_live_and_http_never_import_each_other() -> None:
    crossing = sorted(
        f"{module} → {dep}"
        for module, deps in GRAPH.items()
        for dep in deps
        if {_wing(module), _wing(dep)} in ({"live", "http"}, {"phone", "http"})
    )
    assert crossing == []


def test_surfaces_share_helpers_but_never_import_each_other() -> None:
    for surface in SURFACES:
        assert not GRAPH[surface] & SURFACES, (surface, GRAPH[surface] & SURFACES)
    # The mic's audio goes one way: nothing it leads to leads back.
    assert not GRAPH["live.mic"] & {
        "live.connection",
        "live.conversation",
        "live.uplink",
        "live.playout",
    }
    # Only the composition root builds the runtime; no handler sees it.
    assert [m for m, deps in GRAPH.items() if "runtime" in deps] == ["app"]


def test_nothing_outside_models_imports_a_provider() -> None:
    outside = sorted(
        f"{module} → {dep}"
        for module, deps in GRAPH.items()
        for dep in deps & PROVIDERS
        if _wing(module) != "models"
    )
    assert outside == []


def test_only_the_agents_model_choice_knows_the_offline_model() -> None:
    """The offline model is a test double and a demo: its cues for tasks,
    memory and permissions stay in ``offline/``, handed to ``models.choice``
    by the one place that picks the model."""
    users = sorted(
        f"{module} → {dep}"
        for module, deps in GRAPH.items()
        for dep in deps
        if _wing(dep) == "offline" and _wing(module) != "offline"
    )
    assert users == [
        "agent.definition → offline.model",
        "agent.definition → offline.task_model",
    ]


def test_the_played_position_is_a_port_models_define_and_live_implements() -> None:
    assert "models.played_audio" in GRAPH["models.openai_connection"]
    implementations = [m for m, deps in GRAPH.items() if "models.played_audio" in deps]
    assert "live.played" in implementations
    assert not [m for m in implementations if _wing(m) not in ("models", "live")]


@pytest.mark.parametrize(
    ("module", "must_not_reach"),
    [
        # The crossings that kept the flat audiocore_server/ from becoming wings.
        ("gate.credentials", "live.shutdown"),
        ("gate.credentials", "wire.http_body"),
        ("storage.client_state", "tasks"),
        ("storage.client_state", "agent.demo_tools"),
        ("tasks.live_tools", "agent.demo_tools"),
        ("tasks.live_tools", "agent"),
        ("memory.tool", "tasks"),
        ("turns.events", "live"),
        ("models.openai_connection", "turns.events"),
        ("models.openai_realtime", "live"),
        ("live.run_live", "live.dialects"),
        ("live.shutdown", "models.gemini"),
        ("tasks.adk_backend", "models.gemini"),
    ],
)
def test_the_old_crossings_are_gone(module: str, must_not_reach: str) -> None:
    hits = {d for d in GRAPH[module] if d == must_not_reach or d.startswith(must_not_reach + ".")}
    assert hits == set(), f"{module} imports {sorted(hits)}"


def test_no_two_modules_share_a_name() -> None:
    names = Counter(
        path.stem for path in SERVER.rglob("*.py") if path.name != "__init__.py"
    ) + Counter(path.name for path in SERVER.iterdir() if path.is_dir() and "__" not in path.name)
    assert [name for name, count in names.items() if count > 1] == []


def test_every_server_and_web_module_stays_within_its_line_budget() -> None:
    files = [*SERVER.rglob("*.py"), *WEB.rglob("*.js")]
    long = {
        str(f.relative_to(SERVER.parent)): n
        for f in files
        if (n := len(f.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
