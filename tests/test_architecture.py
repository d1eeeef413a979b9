"""The house stays walkable: every module imports only downward, and nothing imports in a cycle.

Floors (low to high): engine's helpers (errors, paths, units, resources) < engine.models |
engine.documents (side by side) < engine.library (folders indexed, over documents; side by side with models) <
engine.llamacpp (the only room that imports llama_cpp) < decoding's wings < decoding's top < decoding.slots <
engine.toolcalls (calls models write: read, forced, checked) < engine.tooluse (MCP servers and the tool
loop) < engine.measure | engine.serving (side by side, neither imports the other) <
engine (the public API) < engine.cli < app/, where history < the core modules (workers, theme,
replay, ...) < downloads < session < widgets < views < main_window < main. The widgets' families:
controls < charts | attachments (side by side) < transcript < panels; the pages (views.chat,
views.race, views.models) stand side by side. Decoding's wings: sampling < drafting; prompting stands alone (it and the
other two never import each other); no wing imports decoding's top. engine/ never imports app/
or tools/; app/ never imports tools/. Imports inside functions count too: a lazy import is
still a dependency.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

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
ROOMS = {  # room -> floor; a module lives in the longest room its name starts with
    "engine.models": 10,
    "engine.documents": 10,
    "engine.library": 12,  # a folder's documents indexed and searched: above documents, below llama.cpp
    "engine.llamacpp": 20,
    "engine.decoding.sampling": 30,
    "engine.decoding.prompting": 30,
    "engine.decoding.drafting": 31,
    "engine.decoding": 35,
    "engine.decoding.slots": 36,  # above decoding's top: it runs the top's decoder over several sequences
    "engine.toolcalls": 40,
    "engine.tooluse": 45,
    "engine.measure": 50,
    "engine.serving": 50,
    "engine.cli": 70,
    "app.history": 100,  # above all of engine/; plain sqlite3, no other room of app/
    "app.downloads": 112,  # above the core modules (workers), below the session that owns it
    "app.session": 114,
    "app.widgets": 120,
    "app.widgets.controls": 120,
    "app.widgets.charts": 122,
    "app.widgets.attachments": 122,
    "app.widgets.transcript": 124,
    "app.widgets.panels": 126,
    "app.views": 130,
    "app.views.chat": 132,
    "app.views.race": 132,
    "app.views.models": 132,
    "app.views.library": 132,
    "app.main_window": 140,
    "app.main": 150,
    "app.__main__": 160,
}
# Rooms side by side: neither imports the other, whatever their floors.
SIDE_BY_SIDE = [("engine.measure", "engine.serving"), ("engine.models", "engine.documents"), ("engine.models", "engine.library"), ("engine.decoding.drafting", "engine.decoding.prompting"),
                ("app.widgets.charts", "app.widgets.attachments"), ("app.views.chat", "app.views.race"),
                ("app.views.chat", "app.views.models"), ("app.views.race", "app.views.models"),
                ("app.views.library", "app.views.chat"), ("app.views.library", "app.views.race"),
                ("app.views.library", "app.views.models")]
APP_WIDGET_FAMILIES = ("app.widgets.controls", "app.widgets.charts", "app.widgets.attachments", "app.widgets.transcript",
                       "app.widgets.panels")
WINGS = ("engine.decoding.sampling", "engine.decoding.drafting", "engine.decoding.prompting")


def _in(mod: str, room: str) -> bool:
    return mod == room or mod.startswith(room + ".")


def _room(mod: str) -> tuple[str, int]:
    """(room, floor) of a module."""
    if mod in ENGINE_HELPERS:
        return "engine.helpers", 0
    if mod == "engine":
        return "engine", 60
    for room in sorted(ROOMS, key=len, reverse=True):
        if _in(mod, room):
            return room, ROOMS[room]
    if mod.startswith("app"):
        return "app.core", 110
    if mod.startswith("tools"):
        return "tools", 200
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
            elif any((_in(room, a) and _in(dep_room, b)) or (_in(room, b) and _in(dep_room, a)) for a, b in SIDE_BY_SIDE):
                wrong.append(f"{mod} ({room}) imports {dep} ({dep_room}): the two stand side by side")
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
    for room in ("engine.models", "engine.documents", "engine.library", "engine.llamacpp", "engine.decoding", *WINGS, "engine.decoding.slots", "engine.measure",
                 "engine.serving", "engine.toolcalls", "engine.tooluse", "engine.cli", "app", "app.history", "app.downloads",
                 "app.widgets", *APP_WIDGET_FAMILIES, "app.views", "app.views.chat", "app.views.race", "app.views.library", "tools"):
        init = ROOT / room.replace(".", "/") / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "import" in doc.lower() and len(doc) > 80, f"{init}: the docstring must say what the room holds and may import"


def test_engine_top_level_holds_at_most_six_modules():
    top = sorted(p.name for p in (ROOT / "engine").glob("*.py"))
    assert len(top) <= 6, top


def test_app_widgets_top_holds_at_most_twenty_modules_and_its_families():
    """A new widget goes into a family (controls/ when any page could use it), so the top stays
    a lobby: a package counts as one module."""
    base = ROOT / "app" / "widgets"
    top = sorted(p.name for p in base.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists())
    assert len(top) <= 20, top
    families = sorted(p.name for p in base.iterdir() if (p / "__init__.py").exists())
    assert families == sorted(f.rpartition(".")[2] for f in APP_WIDGET_FAMILIES), families


def test_app_has_no_mixins_and_no_file_over_500_lines():
    """A page holds the components it creates and talks to them through methods: a mixin uses
    attributes it never defines, and no import shows that coupling."""
    mixins, long = [], []
    for p in sorted((ROOT / "app").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        text = p.read_text(encoding="utf-8")
        mixins += [f"{rel}: {n.name}" for n in ast.walk(ast.parse(text))
                   if isinstance(n, ast.ClassDef) and n.name.endswith("Mixin")]
        if text.count("\n") > 500:
            long.append(f"{rel}: {text.count(chr(10))} lines")
    assert not mixins, mixins
    assert not long, long


def test_decoding_top_level_holds_at_most_twelve_modules_beside_its_wings():
    """A new part of the loop goes into a wing (or a new one), so the top stays a readable lobby."""
    top = sorted(p.name for p in (ROOT / "engine" / "decoding").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 12, top
    wings = sorted(p.name for p in (ROOT / "engine" / "decoding").iterdir() if (p / "__init__.py").exists())
    assert wings == sorted([w.rpartition(".")[2] for w in WINGS] + ["slots"]), wings


# Modules outside engine/llamacpp/ that still call llama_cpp, each with why (shrinks to nothing).
LLAMA_CPP_OUTSIDE: dict[str, str] = {}


def _uses_llama_cpp(path: Path) -> list[str]:
    """Where `path` imports llama_cpp: import statements anywhere (lazy ones inside functions
    too) and module names handed to importlib, __import__ or find_spec."""
    hits = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func in ("import_module", "__import__", "find_spec") and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
        hits += [f"line {node.lineno}: {n}" for n in names if n.split(".")[0] == "llama_cpp"]
    return hits


def test_only_the_llamacpp_room_imports_llama_cpp():
    """engine/ and app/ reach llama.cpp through engine.llamacpp only (tools/ measure bare
    llama.cpp on purpose, as the baseline Tandem is compared against)."""
    wrong, stale = [], []
    for base in ("engine", "app"):
        for p in sorted((ROOT / base).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            hits = _uses_llama_cpp(p)
            if rel.startswith("engine/llamacpp/"):
                continue
            if hits and rel not in LLAMA_CPP_OUTSIDE:
                wrong.append(f"{rel}: {', '.join(hits)}")
            elif not hits and rel in LLAMA_CPP_OUTSIDE:
                stale.append(rel)
    assert not wrong, "llama_cpp imported outside engine/llamacpp/:\n" + "\n".join(wrong)
    assert not stale, f"no longer import llama_cpp, remove from LLAMA_CPP_OUTSIDE: {stale}"


def test_tests_mirror_the_tree_and_are_named_by_subject():
    """Test files sit under tests/engine/<room>/, tests/app/, tests/packaging/, tests/tools/ (or
    tests/ for the whole house), named by what they test, never by an issue number."""
    named_by_issue = [p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")
                      if re.search(r"(issue|_\d+$)", p.stem)]
    assert not named_by_issue, named_by_issue
    for p in (ROOT / "tests").rglob("test_*.py"):
        rel = p.relative_to(ROOT / "tests").parts[:-1]
        if rel and rel[0] == "engine" and len(rel) > 1:
            room = "engine." + ".".join(rel[1:])
            assert (ROOT / room.replace(".", "/")).is_dir(), f"{p}: tests/{'/'.join(rel)} mirrors no folder of engine/"
        if rel and rel[0] == "app" and len(rel) > 1:
            assert (ROOT / Path(*rel)).is_dir(), f"{p}: tests/{'/'.join(rel)} mirrors no folder of app/"


def test_the_checks_catch_a_cycle_an_upward_import_and_llama_cpp_outside(tmp_path, monkeypatch):
    """The rules above fail on what they should (a room importing upward or sideways, a cycle,
    llama_cpp imported lazily or through importlib outside the seam)."""
    assert _room("engine.llamacpp.llama")[1] < _room("engine.decoding.sampling.sampler")[1]
    assert _room("engine.decoding.sampling.sampler")[1] < _room("engine.decoding.drafting.drafters")[1]
    assert _room("engine.decoding.drafting.drafters")[1] < _room("engine.decoding.decoder")[1]
    assert _room("engine.decoding.decoder")[1] < _room("engine.toolcalls.tool_calls")[1]
    assert _room("engine.toolcalls.tool_calls")[1] < _room("engine.tooluse.loop")[1] < _room("engine.serving.server.app")[1]
    assert _room("app.history.store")[1] < _room("app.workers")[1] < _room("app.downloads.job")[1] \
        < _room("app.session")[1] < _room("app.widgets.controls.toast")[1] < _room("app.widgets.transcript.transcript")[1] \
        < _room("app.widgets.panels.race_pane")[1] < _room("app.views.chat.page")[1] < _room("app.main_window")[1]
    with pytest.raises(AssertionError):
        monkeypatch.setattr(__import__(__name__), "_graph", lambda: {"a": {"b"}, "b": {"a"}})
        test_no_import_cycles()
    for mod, dep in (("engine.models.store", "engine.llamacpp.llama"),  # upward
                     ("engine.library.store", "engine.llamacpp.llama"),  # the library below llama.cpp
                     ("engine.documents.reader", "engine.library.store"),  # documents below the library
                     ("engine.llamacpp.llama", "engine.decoding.events"),  # the seam above decoding
                     ("engine.decoding.sampling.sampler", "engine.decoding.drafting.drafters"),  # wing order
                     ("engine.decoding.drafting.drafters", "engine.decoding.prompting.chat"),  # side by side
                     ("engine.decoding.prompting.chat", "engine.decoding.request"),  # a wing to the top
                     ("engine.toolcalls.tool_calls", "engine.serving.server.app"),
                     ("engine.toolcalls.tool_calls", "engine.tooluse.loop"),  # the reader below the loop
                     ("engine.tooluse.loop", "engine.serving.server.app"),
                     ("engine.measure.bench", "engine.serving.server.app"),  # side by side
                     ("app.history.store", "app.workers"),  # history stands below app's core
                     ("app.widgets.controls.toast", "app.widgets.transcript.transcript"),  # a family upward
                     ("app.widgets.charts.charts", "app.widgets.attachments.attachments"),  # families side by side
                     ("app.widgets.panels.model_bar", "app.views.chat.page"),  # widgets never import views
                     ("app.views.race.page", "app.views.chat.page")):  # pages side by side
        monkeypatch.setattr(__import__(__name__), "_graph", lambda mod=mod, dep=dep: {mod: {dep}, dep: set()})
        with pytest.raises(AssertionError):
            test_every_import_goes_down_a_floor_or_stays_in_its_room()
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    import llama_cpp.llama_grammar\n\n"
                    "def g():\n    return __import__('importlib').import_module('llama_cpp')\n")
    assert len(_uses_llama_cpp(lazy)) == 2


# Packages where no two modules define a top-level class of one name (a reader, a traceback and
# a grep each name one thing). app/ joins once its own duplicates are renamed.
UNIQUE_CLASS_NAMES = ("engine", "app")
# "package.Name" still defined twice, each with why (shrinks to nothing).
SHARED_CLASS_NAMES: dict[str, str] = {}


def _shared_class_names(root: Path) -> dict[str, list[str]]:
    """Top-level class names defined in more than one module under `root`, with those modules."""
    where: dict[str, list[str]] = {}
    for p in sorted(root.rglob("*.py")):
        for node in ast.parse(p.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(p.relative_to(root).as_posix())
    return {name: files for name, files in where.items() if len(files) > 1}


def test_no_two_classes_of_a_package_share_a_name():
    for base in UNIQUE_CLASS_NAMES:
        shared = _shared_class_names(ROOT / base)
        wrong = {n: f for n, f in shared.items() if f"{base}.{n}" not in SHARED_CLASS_NAMES}
        assert not wrong, f"{base}/: classes of one name in two modules, name each after what it is: {wrong}"
        stale = [k for k in SHARED_CLASS_NAMES if k.partition(".")[0] == base and k.partition(".")[2] not in shared]
        assert not stale, f"{base}/: defined once now, remove from SHARED_CLASS_NAMES: {stale}"


def test_the_class_name_check_catches_a_name_in_two_modules(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text("class Fit:\n    pass\n\n\ndef f():\n    class Local:\n        pass\n")
    (tmp_path / "sub" / "b.py").write_text("class Fit:\n    pass\n\n\nclass Local:\n    pass\n")
    assert _shared_class_names(tmp_path) == {"Fit": ["a.py", "sub/b.py"]}


# Where a file or function may be longer, the one line that says why.
LONG_ALLOWED: dict[str, str] = {
    "engine/decoding/decoder.py": "the step's halves the parallel slots share (plan_step, judge, settle) and the model "
                                  "draft's catch-up both work on _Run; the catch-up moves to drafting/ with the slots' Auto (#48 item 3)",
}


def test_files_and_functions_stay_a_screen_or_two():
    """No module in engine/ or app/ over 500 lines and no function over 80, so each part can be
    held in one reading; an exception needs its reason in LONG_ALLOWED."""
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
