"""The DRF shop's driver with one refusal mapped wrong: "not enough quota" read as an invalid
request. ``peakproof driver check`` must exit 1 naming the sold-out step (no_valid_rejection would
otherwise never judge a refusal)."""

from __future__ import annotations

from pathlib import Path

from peakproof.cases.tickets import TicketsDriver
from peakproof.driver import driver_class
from peakproof.http import ErrorMap

DrfShop = driver_class(f"{Path(__file__).resolve().parents[2] / 'examples' / 'drfshop' / 'driver.py'}:DrfShop",
                       TicketsDriver)


class SoldOutAsInvalid(DrfShop):
    errors = ErrorMap(field=DrfShop.errors.fields, codes=DrfShop.errors.codes,
                      prefixes={**DrfShop.errors.prefixes, "There is not enough quota": "invalid_request"})
