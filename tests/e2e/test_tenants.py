"""The machine's other tenants, measured: who used the CPU during a stage, read from /proc, and a listening
socket's owner. How a neighbour's share is judged is tests/unit/test_tenants.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
import time

import pytest

from peakproof.tenants import TenantMeter, listening_pids

LINUX = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="[platform] reads Linux's /proc")


@LINUX
def test_the_owner_of_a_listening_socket_is_found_by_its_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        assert listening_pids(port) == [os.getpid()]
    assert listening_pids(port) == []


@LINUX
@pytest.mark.alone  # it measures the machine: no other test beside it (tests/conftest.py)
def test_a_busy_process_outside_the_run_is_measured_as_a_neighbour_and_one_inside_as_the_run(tmp_path: Path) -> None:
    busy = "import time\nt = time.time()\nwhile time.time() - t < 4: pass"
    root = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])  # the "run": idle
    script = tmp_path / "the_busy_outsider.py"  # named as the meter names a script: told from any other neighbour
    script.write_text(busy)
    outside = subprocess.Popen([sys.executable, str(script)])
    try:
        meter = TenantMeter(root=root.pid)
        for _ in range(3):
            time.sleep(1.0)
            meter.sample()
        t = meter.result()
    finally:
        outside.kill()
        root.kill()
    # a busy loop takes most of a core on any machine, however fast, even beside another busy loop
    assert t.total("neighbours") / t.wall > 0.4 and t.total("run") / t.wall < 0.1, t.sentence()
    # and it is named, by its name, with most of what it took (beside busy-neighbour's loop it need not be the
    # busiest: both take most of a core)
    assert t.outside.get("the_busy_outsider.py", 0.0) > 0.4 * t.wall, t.outside


@LINUX
@pytest.mark.alone  # it measures the machine: no other test beside it (tests/conftest.py)
def test_a_stage_run_beside_a_meter_gets_its_tenancy_when_it_ends() -> None:
    from peakproof.tenants import Metered

    with Metered(None) as m:
        time.sleep(1.3)
    assert m.tenancy is not None and m.tenancy.measured and m.tenancy.wall >= 1.0
    assert "processes outside the run" in m.tenancy.sentence()
