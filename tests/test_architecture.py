"""The house stays walkable: every module imports only downward, and nothing imports in a cycle.

Floors (low to high): engine's helpers (errors, paths, units, resources) < engine.models <
engine.decoding < engine.measure | engine.serving (side by side, neither imports the other) <
engine (the public API) < engine.cli < app/, where the core modules < widgets < views <
main_window < main. engine/ never imports app/ or tools/; app/ never imports tools/.
Imports inside functions count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "app", "tools")


def _modules() -> dict[str, Path]:
    out = {}
    for base in PACKAGES:
        for p in (ROOT / base).rglob("*.py"):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _imports(mod: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ours that `mod` imports (a package's name where a name is not a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                full = f"{target}.{a.name}"
                found.add(full if full in known else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m.split(".")[0] in PACKAGES and m != mod}


ENGINE_HELPERS = {"engine.errors", "engine.paths", "engine.units", "engine.resources"}
ENGINE_FLOORS = {"engine.models": 1, "engine.decoding": 2, "engine.measure": 3, "engine.serving": 3, "engine.cli": 5}
APP_FLOORS = {"app.widgets": 12, "app.views": 13, "app.main_window": 14, "app.main": 15, "app.__main__": 16}  # above all of engine/


def _room(mod: str) -> tuple[str, int]:
    """(room, floor) of a module."""
    if mod in ENGINE_HELPERS:
        return "engine.helpers", 0
    if mod == "engine":
        return "engine", 4
    for floors in (ENGINE_FLOORS, APP_FLOORS):
        for room, floor in floors.items():
            if mod == room or mod.startswith(room + "."):
                return room, floor
    if mod.startswith("app"):
        return "app.core", 11
    if mod.startswith("tools"):
        return "tools", 20
    raise AssertionError(f"{mod}: in no room; add it to a room in tests/test_architecture.py")


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {m: {d for d in _imports(m, p, known) if d in known} for m, p in known.items()}


def test_every_import_goes_down_a_floor_or_stays_in_its_room():
    wrong = []
    for mod, deps in _graph().items():
        room, floor = _room(mod)
        for dep in deps:
            dep_room, dep_floor = _room(dep)
            if dep_room == room:
                continue
            if room.split(".")[0] == "engine" and dep_room.split(".")[0] != "engine":
                wrong.append(f"{mod} imports {dep} (engine/ never imports app/ or tools/)")
            elif dep_room == "tools" or dep_floor >= floor:
                wrong.append(f"{mod} ({room}, floor {floor}) imports {dep} ({dep_room}, floor {dep_floor})")
    assert not wrong, "imports that run up or sideways:\n" + "\n".join(sorted(wrong))


def test_no_import_cycles():
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_each_room_says_what_it_holds_and_may_import():
    for room in ("engine.models", "engine.decoding", "engine.measure", "engine.serving", "engine.cli",
                 "app", "app.widgets", "app.views", "tools"):
        init = ROOT / room.replace(".", "/") / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "import" in doc.lower() and len(doc) > 80, f"{init}: the docstring must say what the room holds and may import"


def test_engine_top_level_holds_at_most_six_modules():
    top = sorted(p.name for p in (ROOT / "engine").glob("*.py"))
    assert len(top) <= 6, top


def test_the_checks_catch_a_cycle_and_an_upward_import(tmp_path, monkeypatch):
    """The rules above fail on what they should (a room importing upward, a cycle)."""
    assert _room("engine.decoding.llama")[1] < _room("engine.measure.bench")[1]
    with __import__("pytest").raises(AssertionError):
        monkeypatch.setattr(__import__(__name__), "_graph", lambda: {"a": {"b"}, "b": {"a"}})
        test_no_import_cycles()
    monkeypatch.setattr(__import__(__name__), "_graph", lambda: {"engine.models.store": {"engine.decoding.llama"},
                                                                    "engine.decoding.llama": set()})
    with __import__("pytest").raises(AssertionError):
        test_every_import_goes_down_a_floor_or_stays_in_its_room()


# Where a file or function may be longer, the one line that says why (none today).
LONG_ALLOWED: dict[str, str] = {}


def test_files_and_functions_stay_a_screen_or_two():
    """No module in engine/ or app/ over 500 lines and no function over 80, so each part can be
    held in one reading (issue 23); an exception needs its reason in LONG_ALLOWED."""
    too_long = []
    for base in ("engine", "app"):
        for p in sorted((ROOT / base).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            text = p.read_text(encoding="utf-8")
            if text.count("\n") > 500 and rel not in LONG_ALLOWED:
                too_long.append(f"{rel}: {text.count(chr(10))} lines")
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    n = node.end_lineno - node.lineno + 1
                    if n > 80 and f"{rel}:{node.name}" not in LONG_ALLOWED:
                        too_long.append(f"{rel}:{node.name}: {n} lines")
    assert not too_long, "split these (or say why in LONG_ALLOWED):\n" + "\n".join(too_long)
