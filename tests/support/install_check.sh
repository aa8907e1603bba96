#!/usr/bin/env bash
# Run by hand (about 5 min; it serves on 127.0.0.1:8111, 8122, 8123): tests/support/install_check.sh [WORKDIR]
# It needs the checkout's own environment (pip install -e '.[test]') for the last step, the JUnit validation.
# Issue 35's must-shows 1-3, from a clean clone, a built wheel, fresh venvs, folders outside the checkout.
set -u
CHECKOUT=$(cd "$(dirname "$0")/../.." && pwd); M=${1:-/tmp/m35}; rm -rf $M; mkdir -p $M; cd $M
step() { echo; echo "=== $* ($(date +%T))"; }
step "clone, build the wheel, fresh venv, pip install the wheel (not editable)"
git clone -q "$CHECKOUT" src && git -C src log --oneline -1
python3 -m venv venv && . venv/bin/activate
pip install -q --upgrade pip 2>&1 | grep -v "WARNING: Location"
pip wheel -q --no-deps -w dist ./src 2>&1 | grep -v "WARNING: Location"; ls dist
pip install -q dist/peakproof-*.whl 2>&1 | grep -v "WARNING: Location"
pip show -f peakproof | grep -E "^(Version|Location)|Editable"; ls venv/lib/python3.11/site-packages | grep -E "^(targets|loadtests|properties|peakproof)"
mkdir user && cd user
step "MS1: python -c 'import targets' (must fail)"; python -c "import targets"; echo "exit $?"
step "MS1+MS3(PASS): peakproof run --junit pass.xml (empty folder)"; peakproof --version
peakproof run --junit pass.xml > run.log 2>&1; echo "exit $?"; grep -E "^peakproof verdict|JUnit XML|^exit" run.log; ls reports
step "MS1: peakproof run feed --skip-load"; peakproof run feed --skip-load > feed.log 2>&1; echo "exit $?"; grep -E "^peakproof verdict|^\s+\[" feed.log | head -3 | cut -c1-160
step "MS1: a served reference, the documented Locust and pytest commands"
# the target on a core of its own, as on a machine of its own: peakproof pins its generators to the first core
taskset -c 1 peakproof serve tickets --port 8111 > serve.log 2>&1 & SERVE=$!; sleep 3; cat serve.log
echo '$ locust -f "$(peakproof locustfile)" --headless --scenario tickets-opening --host http://127.0.0.1:8111/tickets'
locust -f "$(peakproof locustfile)" --headless --scenario tickets-opening --host http://127.0.0.1:8111/tickets > locust.log 2>&1; echo "exit $?"; grep -E "tickets-opening: (PASS|FAIL|INCONCLUSIVE)" locust.log
echo '$ pytest --pyargs peakproof.properties.test_tickets --target-url http://127.0.0.1:8111/tickets'
pytest --pyargs peakproof.properties.test_tickets --target-url http://127.0.0.1:8111/tickets > pytest.log 2>&1; echo "exit $?"; tail -1 pytest.log; grep -c "Warning" pytest.log
step "MS2: peakproof init tickets in an empty git repository"
mkdir $M/shop && cd $M/shop && git init -q && peakproof init tickets > $M/init.log; echo "exit $?"; git status --short --untracked-files=all
step "MS2: the CI jobs' commands, in order, by hand (a fresh venv as the CI's python)"
python - > $M/jobs.sh <<'PY'
import shlex, yaml
doc = yaml.safe_load(open("peakproof.gitlab-ci.yml"))
for name in ("peakproof-properties", "peakproof-load"):
    print(f"echo '--- job {name}'")
    for c in doc[name]["script"]:
        print("echo " + shlex.quote("$ " + c))
        print(c + "; echo \"exit $?\"")
PY
deactivate; python3 -m venv $M/civenv && . $M/civenv/bin/activate; which python
export STAGING_URL=http://127.0.0.1:8111/tickets PEAKPROOF_PIP=$(ls $M/dist/peakproof-*.whl)
bash $M/jobs.sh > $M/jobs.log 2>&1; grep -E "^--- job|^\\$ |failed: exit|passed|^peakproof verdict|^exit |JUnit" $M/jobs.log | cut -c1-200
ls reports
kill $SERVE; wait $SERVE 2>/dev/null
step "MS3: FAIL and INCONCLUSIVE runs with --junit (the clone's example services, unlike ours)"
cd $M/user; deactivate; . $M/venv/bin/activate
python $M/src/examples/tickets/service.py --port 8122 --api-key key --racy > racy.log 2>&1 & RACY=$!; sleep 2
peakproof run tickets --driver $M/src/examples/tickets/driver.py:BoxOffice --target-url "$(awk '/listening on/{print $NF}' racy.log)" --admin-token key --scale 0.02 --calibrated-rate 1000 --hold-window 0.2 --skip-properties --junit fail.xml > fail.log 2>&1; echo "exit $?"; grep -E "^peakproof verdict|JUnit XML" fail.log
kill $RACY
python $M/src/examples/feed/service.py --port 8123 > chirp.log 2>&1 & CHIRP=$!; sleep 2
peakproof run feed --driver $M/src/examples/feed/driver.py:Chirp --target-url "$(awk '/listening on/{print $NF}' chirp.log)" --scale 0.005 --duration 6 --calibrated-rate 1000 --skip-properties --junit inconclusive.xml > inc.log 2>&1; echo "exit $?"; grep -E "^peakproof verdict|JUnit XML" inc.log
kill $CHIRP
step "MS3: the three JUnit files, validated against the schema GitLab's parser reads, their test cases"
deactivate
cd "$CHECKOUT" && for f in $M/user/pass.xml $M/user/fail.xml $M/user/inconclusive.xml $M/shop/reports/peakproof-load.xml $M/shop/reports/peakproof-properties.xml; do
  python -c "
import sys, collections
from tests.support.junit_report import validated
got = validated(sys.argv[1])
print(sys.argv[1], 'valid;', dict(collections.Counter(s for s, _ in got.values())))
for (cls, name), (status, text) in got.items():
    print(f'  {status:8} {cls} :: {name}' + (f'  | {text.splitlines()[0][:110]}' if status != 'success' else ''))
" $f
done
step "done"
