"""Every registered case folder's scenarios (its ``load.py``), for a case with no file here of its own:
a case copied into a folder of its own needs no edit in this one. ``peakproof run CASE`` hands such a
case's scenarios to Locust through this file."""

import importlib

from peakproof.cases import all_cases
from peakproof.load.engine import OpenModelUser, ScenarioShape

for _case in all_cases().values():
    try:
        importlib.import_module(f"{_case.package}.load")  # its scenarios register on import
    except ModuleNotFoundError as e:
        if e.name != f"{_case.package}.load":
            raise

__all__ = ["OpenModelUser", "ScenarioShape"]
