"""Import circles in the library, counted from the source (every import statement, function-level
included, since a lazy import is a dependency too): only the ones listed here, each with why.

A circle is a strongly connected component of the import graph over graph/, nodes/, tools/, eval/
and knowledge/. Adding a module to a listed circle, or a new circle, fails this test.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("graph", "nodes", "tools", "eval", "knowledge")

# Each remaining circle, and why it stays.
KNOWN = {
    # The one LLM seam dispatches on the spec (local, replay) to modules that build their models
    # with the seam's own helpers (openai_chat_model, LLMError): the seam stays the only entry.
    frozenset({"nodes.llm", "nodes.local_model", "nodes.recording"}): "llm seam and its providers",
    # Routers are the only place loop limits are read (DESIGN.md), and the search rounds' routers
    # send the search's payloads; the search node reads the routers' budgets.
    frozenset({"graph.routing", "nodes.search", "nodes.conductor"}): "routers and the search rounds",
}


def _modules() -> dict[str, Path]:
    out = {}
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    def resolve(name: str) -> str | None:
        parts = name.removeprefix("pragma.").split(".")
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in mods:
                return ".".join(parts[:end])
        return None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            for name in names:
                if name.startswith("pragma.") and (target := resolve(name)) and target != mod:
                    if not mod.startswith(target + "."):  # a package's own __init__ is no circle
                        graph[mod].add(target)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.add(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_only_the_known_import_circles_remain():
    circles = set(_circles(_graph(_modules())))
    assert circles <= set(KNOWN), sorted(sorted(c) for c in circles - set(KNOWN))


def test_the_count_sees_a_circle_through_a_function_level_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [frozenset({"a", "b", "c"})]
    assert "tools.backends" not in {m for c in _circles(_graph(_modules())) for m in c}  # device.py opened it
