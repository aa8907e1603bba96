"""The open-model load engine, split along its seams:

* :mod:`.scenario`: the scenario API and registry (``Scenario``, ``Calibration``, ``Arrival``;
  no Locust import);
* :mod:`.dispatch`: the dispatcher (``Slots``, ``CpuWatch``);
* :mod:`.transport` and :mod:`.wire`: the HTTP transport and Locust's statistics in batches;
* :mod:`.messages`: what a master and its workers say;
* :mod:`.engine`: the engine's state per process, Locust's listeners, the user and the shape;
* :mod:`.judge`: the judgement, a pure function of a history and a spec.

The options are data in :mod:`peakproof.options`; the run is a :class:`peakproof.spec.RunSpec`.
A locustfile imports :mod:`.engine` (``OpenModelUser``, ``ScenarioShape``) and the scenario API.
"""
