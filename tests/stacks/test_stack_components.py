"""The stacks' components start on the machines CI gives them (root in a container, parallel sessions)."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

import pytest

from examples.stacks.infra import Stack
@pytest.mark.skipif(os.geteuid() != 0, reason="[platform] only root makes pgserver run PostgreSQL as a user of its own")
def test_postgres_starts_as_root_while_its_folders_parent_is_made_private_again(tmp_path: Path) -> None:
    # Every new pytest session sets /tmp/pytest-of-root back to 0700 while pgserver has opened it to its
    # own user: CI's examples tier lost initdb to "Permission denied" once. Here a thread does the same.
    private = Path(tempfile.mkdtemp(dir=tmp_path))
    folder = private / "stack"
    folder.mkdir()
    stop = threading.Event()

    def close_the_parent() -> None:
        while not stop.is_set():
            private.chmod(0o700)
            stop.wait(0.01)

    closer = threading.Thread(target=close_the_parent, daemon=True)
    closer.start()
    stack = Stack(folder)
    try:
        uri = stack.postgres()
        assert uri.startswith("postgresql://")
    finally:
        stop.set()
        closer.join()
        stack.close()
    assert (folder / "postgres.log").is_file(), sorted(p.name for p in folder.iterdir())
    assert not (folder / "pg").exists(), "the database's folder outlived the stack"
