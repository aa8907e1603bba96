"""peakproof in Locust's web UI (``locust -f loadtests/`` without ``--headless``).

* The start form: peakproof's options are Locust "custom parameters"; ``--scenario`` is a
  drop-down of the registered scenarios (its ``choices``), and the user-count fields are
  hidden because the run is driven by the scenario's shape (one dispatcher a process).
* A "peakproof" tab (Locust's extended tabs): the scenario, its state, and when the run ends
  the PASS / FAIL / INCONCLUSIVE verdict, its reasons, every check's line, and the report.
* ``/peakproof/verdict`` (JSON) and ``/peakproof/report`` (the HTML report of the last run).

Imports flask through Locust: only Locust processes load it (through :mod:`peakproof.load`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

TAB = "peakproof"


def install(environment: Any, engine: Callable[[], Any], last: dict[str, Any]) -> None:
    """Add the tab, its table and the routes to ``environment.web_ui`` (when there is one).

    ``engine()`` returns the current engine (or None); ``last`` holds the last run's verdict
    (``outcome``, ``reasons``, ``lines``, ``report``), filled by the judge.
    """
    web_ui = getattr(environment, "web_ui", None)
    if web_ui is None:
        return
    from flask import Response, request, send_file

    web_ui.template_args["extended_tabs"] = [{"title": "peakproof verdict", "key": TAB}]
    web_ui.template_args["extended_tables"] = [
        {"key": TAB, "structure": [{"key": "what", "title": "peakproof"}, {"key": "value", "title": ""}]}]

    def rows() -> list[dict[str, str]]:
        eng = engine()
        out = [{"what": "scenario", "value": eng.scenario.name if eng else
                (getattr(environment.parsed_options, "scenario", "") or "(choose one in the start form)")}]
        if eng is not None:
            state = ("judged" if eng.finished else "running" if eng.started_wall else "waiting for the start")
            out.append({"what": "state", "value": state})
        if last.get("outcome"):
            out.append({"what": "verdict", "value": last["outcome"]})
            out += [{"what": "why", "value": r} for r in last.get("reasons", [])[:6]]
            out += [{"what": "check", "value": line} for line in last.get("lines", [])]
            out.append({"what": "report", "value": "/peakproof/report  (" + str(last.get("report", "")) + ")"})
        return out

    @web_ui.app.after_request
    def _with_verdict(response: Any) -> Any:
        # Locust's page polls /stats/requests; extended tables read their rows from it
        if request.path != "/stats/requests" or not response.is_json:
            return response
        doc = response.get_json()
        doc["extended_stats"] = [{"key": TAB, "data": rows()}]
        response.set_data(json.dumps(doc))
        return response

    @web_ui.app.route("/peakproof/verdict")
    def _verdict() -> Any:
        return Response(json.dumps({"rows": rows(), **{k: v for k, v in last.items() if k != "lines"}}),
                        mimetype="application/json")

    @web_ui.app.route("/peakproof/report")
    def _report() -> Any:
        path = last.get("report")
        if not path or not Path(path).exists():
            return Response("no report yet: start a run, and it appears here when the run is judged", status=404,
                            mimetype="text/plain")
        return send_file(Path(path).resolve(), mimetype="text/html")
