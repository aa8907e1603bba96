"""The error base every reference target shares (cores raise it; HTTP layers answer with it)."""

from __future__ import annotations


class ContractError(Exception):
    """A definite refusal a target answers in its contract's error shape: ``{error: code, message}``."""

    status = 400
    code = "invalid_request"

    def __init__(self, message: str, **extra: object) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra


def refusal(base: type[ContractError], status: int, code: str, doc: str = "") -> type[ContractError]:
    """A subclass of a case's error base with its HTTP status and contract code (one line a refusal)."""
    return type("".join(w.title() for w in code.split("_")), (base,), {"status": status, "code": code,
                                                                        "__doc__": doc or f"{status} {code}"})
