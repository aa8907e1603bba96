"""peakproof: prove that a system design keeps its promises at its peak load.

The public surface, importable from here (each name loads its module on first use, so ``import
peakproof`` stays cheap and patches nothing):

* writing a driver for your own API: :class:`HttpDriver`, :class:`ErrorMap`, :func:`translate`,
  :class:`Failed`, :class:`Operation`, :func:`parse_time` (``docs/drivers.md``);
* a case of your own: :class:`Case`, :class:`RunSpec`, :class:`CheckResult`, :class:`Violations`,
  :class:`CheckRegistry`, :class:`History`, :class:`Op` (``docs/own-case.md``);
* its load scenarios: :class:`Scenario`, :func:`scenario`, :class:`Arrival`, :class:`Context`.

Everything else (the load engine, the runner, the plugin's machinery) is the harness's own and may
change between versions.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.2.0"

_PUBLIC = {
    "HttpDriver": "peakproof.driver", "ErrorMap": "peakproof.http", "translate": "peakproof.driver",
    "Failed": "peakproof.driver", "Operation": "peakproof.driver", "parse_time": "peakproof.timefmt",
    "Case": "peakproof.case", "RunSpec": "peakproof.spec", "CheckResult": "peakproof.checks",
    "Violations": "peakproof.checks", "CheckRegistry": "peakproof.checks", "History": "peakproof.history",
    "Op": "peakproof.history", "Scenario": "peakproof.load.scenario", "scenario": "peakproof.load.scenario",
    "Arrival": "peakproof.load.scenario", "Context": "peakproof.load.scenario",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'peakproof' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
