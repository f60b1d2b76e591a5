"""The house as drawn (docs/design.md, "Layout"): data flows one way, leaderboards -> trainers -> judges ->
agents -> prover_gym, and no module of the five packages imports, however indirectly, a module that imports it.

The graph is drawn from the source, every import statement counted: module level, inside functions (a lazy
import is the same dependency, hidden) and under ``TYPE_CHECKING``. ``from a import b`` counts as importing the
module ``a.b`` where that is a module, else ``a``; a package's implicit import of its parent is not counted."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["prover_gym", "agents", "judges", "trainers", "leaderboards"]  # each may import only itself and below


def _modules() -> dict[str, Path]:
    out = {}
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (see the module docstring)."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, up level - 1
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
                ]
            for target in targets:
                while target and target not in modules:  # `import a.b.c` names a.b.c, else its nearest package
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
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
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_lazy_imports_and_finds_a_circle():
    graph = import_graph()
    assert (
        "trainers.judge_eval" in graph["leaderboards.report"]
        or "trainers.judge_eval" in graph["leaderboards.credit_view"]
    )  # imported inside a function there
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    found = cycles(import_graph())
    assert not found, "import circles (move what both sides need into the lower module): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def test_no_import_runs_up_the_layers():
    up = []
    for module, targets in import_graph().items():
        layer = LAYERS.index(module.split(".")[0])
        up += [f"{module} -> {t}" for t in sorted(targets) if LAYERS.index(t.split(".")[0]) > layer]
    assert not up, f"imports that run up the layers {' -> '.join(reversed(LAYERS))}: {up}"
