"""The architecture's import rules, checked on the source (ARCHITECTURE.md, "Import rules").

A target is a system under test: it must run with nothing of the harness installed, so
``targets/`` imports nothing from ``peakproof``, ``properties`` or ``loadtests``. Shared
harness machinery does not import locust (gevent's monkey-patching must not leak into pytest
runs). Tests reach modules by package, never by editing ``sys.path``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in a file, at any depth (a lazy import counts too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def offenders(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{p.relative_to(ROOT)}:{line} imports {mod}" for p in sorted((ROOT / folder).rglob("*.py"))
            for line, mod in imports(p) if mod.split(".")[0] in forbidden]


def test_no_target_imports_the_harness() -> None:
    assert offenders("targets", ("peakproof", "properties", "loadtests", "tests")) == []


LOCUST_SIDE = ("engine.py", "dispatch.py", "transport.py", "wire.py")


def test_the_harness_never_imports_locust_at_module_level() -> None:
    bad = []
    for p in sorted((ROOT / "peakproof").rglob("*.py")):
        if p.parent.name == "load" and p.name in LOCUST_SIDE:  # the Locust side: only Locust processes load them
            continue
        if p.name == "load.py" and p.parent.parent.name == "cases":  # a case folder's scenarios: the Locust side too
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in tree.body:  # module level only: a function may import locust when it runs in Locust
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{p.relative_to(ROOT)}:{node.lineno} imports {n}" for n in names
                    if n.split(".")[0] in ("locust", "gevent")]
    assert bad == []


def test_no_test_edits_sys_path() -> None:
    bad = [f"{p.relative_to(ROOT)}:{i}" for folder in ("tests", "properties") for p in sorted((ROOT / folder).rglob("*.py"))
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
           if "sys.path" in line and p.name != "test_import_rules.py"]
    assert bad == []


def test_the_rule_catches_a_target_that_imports_the_harness(tmp_path: Path) -> None:
    bad = tmp_path / "server.py"
    bad.write_text("def f():\n    from peakproof.models.feed import compute\n    return compute\n")
    assert imports(bad) == [(2, "peakproof.models.feed")]


def test_the_feed_targets_default_threshold_is_the_one_the_seeds_model_computes() -> None:
    from peakproof.cases.feed.case import seed_threshold as feed_seed_threshold
    from peakproof.targets.feed.server import SEED_THRESHOLD

    assert SEED_THRESHOLD == feed_seed_threshold()
