#!/bin/bash
# Usage: benchmarks/sigkill_notifications.sh   (OUT=dir for the logs and the report; ports 18130 and 18131)
# SIGKILL the served notifications target 15 s after deliveries start flowing in a full-rate (1,736.11/s)
# peak minute, restart it on
# the same database 2 s later, and let the run finish and judge.
cd "$(dirname "$0")/.."  # the project root; run it inside the project's virtualenv
OUT=${OUT:-/tmp/peakproof-kill}
pkill -f "peakproof serve"; sleep 1; rm -rf $OUT; mkdir -p $OUT
peakproof serve providers --port 18130 > $OUT/prov.log 2>&1 &
serve() { setsid peakproof serve notifications --port 18131 --provider-url http://127.0.0.1:18130 --db $OUT/n.db \
  --backoff 1.25 --breaker-cool-down 1 > $OUT/target-$1.log 2>&1 & echo $! > $OUT/target.pid; }
serve 1; sleep 4
locust -f loadtests/ --headless --host http://127.0.0.1:18131/notifications --provider-url http://127.0.0.1:18130 \
  --scenario notifications-peak --scale 1 --duration 60 --time-scale 24 --breaker-cool-down 1 \
  --report-dir $OUT --only-summary --loglevel WARNING > $OUT/locust.log 2>&1 &
LOCUST=$!
# wait until the peak minute is under way (deliveries flowing), then 15 s more
until [ "$(curl -s http://127.0.0.1:18130/calls | python -c 'import sys,json; print(len(json.load(sys.stdin)["calls"]))')" -gt 2000 ]; do sleep 2; done
sleep 15
echo "SIGKILL at $(date +%T.%N)"; kill -9 -- -$(cat $OUT/target.pid)
sleep 2; serve 2; echo "restarted at $(date +%T.%N)"
wait $LOCUST; echo "locust exit $?"
