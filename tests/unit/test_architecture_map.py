"""ARCHITECTURE.md stays true: its generated part (every module with its docstring's first sentence, each case's
checks from its registry) is what ``python -m tests.support.architecture --write`` writes today, and every path
its hand-written part names exists."""

from __future__ import annotations

from tests.support.architecture import current, generate, modules, named_paths, resolves


def test_the_generated_map_is_what_the_tree_and_the_registries_say_today() -> None:
    assert current() is not None, "ARCHITECTURE.md has no generated part: python -m tests.support.architecture --write"
    assert current() == generate(), ("ARCHITECTURE.md's generated part is stale (a module or a check was added, "
                                     "renamed or re-described): python -m tests.support.architecture --write")


def test_every_module_says_what_it_is_in_its_first_sentence() -> None:
    text = generate()
    bare = [p.as_posix() for p in modules() if f"| `{p.as_posix()}` | (no docstring) |" in text]
    assert not bare, f"modules without a docstring (the map would say nothing of them): {bare}"


def test_every_path_the_hand_written_part_names_exists() -> None:
    names = named_paths()
    assert len(names) > 50, names  # the map names the repository's files: a reader that found none is broken
    assert [n for n in names if not resolves(n)] == []
