"""The package's imports as a reader sees them (every import: function-level, TYPE_CHECKING, package
faces, and the registry's importlib loads by a computed name), and the loops among them: what the
layout tests (tests/unit/test_layout.py) and the fresh-process import test (tests/served) read."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "peakproof"


def modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages([str(PKG)], "peakproof."))


def module_file(name: str) -> Path:
    path = PKG.joinpath(*name.split(".")[1:])
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def module_imports(name: str, source: str | None = None, known: set[str] | None = None) -> set[str]:
    """The package's modules ``name`` imports, wherever the import stands: at module level, inside
    a function (a lazy import is still a dependency) and under ``if TYPE_CHECKING:`` (a type is one
    too). ``from pkg import sub`` counts ``pkg.sub`` when ``sub`` is a module."""
    known = set(modules()) | {"peakproof"} if known is None else known
    is_pkg = source is None and module_file(name).name == "__init__.py"
    text = module_file(name).read_text(encoding="utf-8") if source is None else source
    package = name if is_pkg else name.rsplit(".", 1)[0]
    root = name.split(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                mod = alias.name
                while mod and mod not in known:  # import a.b.c: the deepest module of ours
                    mod = mod.rpartition(".")[0]
                if mod:
                    found.add(mod)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != root:
                continue
            subs = {f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in known}
            found |= subs or {mod}
    # A package face importing its own submodules re-exports them: an edge like any other, so a submodule
    # that imports its face back closes a loop (package faces count).
    return {m for m in found | dynamic_imports(name, text, known) if m != name}


# Loads by a name no literal in the module spells, and where such a name can point. A new one fails
# test_every_load_by_a_computed_name_is_declared until it is declared here.
DYNAMIC_REACH = {
    "peakproof.case": ("peakproof.models.",),  # Case.model_module(): the case's ported model
    "peakproof.driver": (),  # driver_class: the user's --driver module, outside the package
}


def _is_import_module(node: ast.AST) -> bool:
    f = node.func if isinstance(node, ast.Call) else None
    return (isinstance(f, ast.Attribute) and f.attr == "import_module") or \
        (isinstance(f, ast.Name) and f.id in ("import_module", "__import__"))


def dynamic_imports(name: str, source: str, known: set[str], *, strict: bool = False) -> set[str]:
    """The modules ``name`` loads through ``importlib.import_module`` (a load the static reader misses):
    a literal name; a name ending in a literal (``f"{package}.checkup"``: every module so named) or
    starting with one (``"peakproof.models." + x``: every module under it); a package walking its own
    ``__path__`` (the registry): each of its subpackages; a name from the module's own literals
    (``_PUBLIC``'s table); else what :data:`DYNAMIC_REACH` declares (``strict``: raise for an undeclared one)."""
    tree = ast.parse(source)
    literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    walks_own_path = "iter_modules" in source and "__path__" in source
    found: set[str] = set()
    for node in ast.walk(tree):
        if not _is_import_module(node) or not node.args:  # type: ignore[attr-defined]
            continue
        arg = node.args[0]  # type: ignore[attr-defined]
        parts = arg.values if isinstance(arg, ast.JoinedStr) else [arg.left, arg.right] \
            if isinstance(arg, ast.BinOp) else [arg]
        head = parts[0].value if isinstance(parts[0], ast.Constant) and isinstance(parts[0].value, str) else ""
        tail = parts[-1].value if isinstance(parts[-1], ast.Constant) and isinstance(parts[-1].value, str) else ""
        if isinstance(arg, ast.Constant):
            found |= {arg.value} & known
        elif tail.startswith("."):
            found |= {m for m in known if m.endswith(tail)}
        elif head:
            found |= {m for m in known if m.startswith(head)}
        elif walks_own_path:
            found |= {m for m in known if m.startswith(name + ".") and m.count(".") == name.count(".") + 1}
        elif {lit for lit in literals if lit in known}:
            found |= {lit for lit in literals if lit in known}
        elif name in DYNAMIC_REACH:
            found |= {m for m in known for prefix in DYNAMIC_REACH[name] if m.startswith(prefix)}
        elif strict:
            raise AssertionError(f"{name}:{node.lineno} loads a module by a computed name no rule reads: "
                                 f"declare where it can point in DYNAMIC_REACH")
    return found


def top_level_imports(name: str, source: str, known: set[str]) -> set[str]:
    """What the layout test read before: module-level statements only (kept to show what it missed)."""
    tree = ast.parse(source)
    tree.body = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return module_imports(name, ast.unparse(tree), known)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each as a loop to read:
    its modules in order, the first repeated at the end."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(_loop(sorted(group), graph))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _loop(group: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One loop through a strongly connected group, from its first module back to it."""
    members, start = set(group), group[0]
    paths = {start: [start]}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph.get(v, ()) & members):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                todo.append(w)
    return group + [start]
