"""The package's shape holds: no module imports one that imports it back, and benchmarks live in eval/.

Imports are read from the source (every `import`, at module top or inside a function), so a circle
that only closes when some command runs is found too.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "personalq"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path, name: str, modules: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in modules else base)
    return (found & modules) - {name}


def import_graph() -> dict[str, set[str]]:
    files = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {name: _imported(path, name, set(files)) for name, path in files.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), i.e. every import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_circle_finder_finds_a_circle_and_a_self_contained_graph_has_none():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_relative_and_absolute_imports_are_both_read():
    graph = import_graph()
    assert "personalq.store.repo" in graph["personalq.store"]  # the package re-exports RepoStore
    assert "personalq.demo.instances" in graph["personalq.demo.fidelity"]


def test_no_module_imports_one_that_imports_it_back():
    assert circles(import_graph()) == []


def test_benchmarks_live_only_in_eval():
    benches = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if "bench" in p.stem]
    assert benches and all(path.startswith("eval/") for path in benches), benches
