"""Ports of the seeds' models: back-of-envelope tables and simulations, exact to the printed digit.

One module per case, each with a ``Params`` dataclass (the seed's values as defaults),
``compute(params) -> dict`` (every figure) and ``render(result) -> str`` (the tables). A
case's :class:`~peakproof.case.Case` names its model (``model``, ``model_params``): the
registry, not this package, lists them.
"""
