#!/usr/bin/env bash
# Runs the live tests of the official Queen 2 Python client (`queen-mq` 2.6.0 from
# PyPI: the `tests/` its source distribution ships, 116 tests, pytest with
# pytest-asyncio) against the release broker of this workspace, so the tests that
# pass keep passing. The Rust client's live tests are .ci/official-client.sh.
#
# Usage: .ci/official-python.sh [PYTEST ARGS ...]
#   e.g. .ci/official-python.sh tests/test_kv.py      .ci/official-python.sh -k lease -x
#
# Two runs, each on a fresh broker (the helpers of .ci/broker.sh), and a summary:
#   no auth  the broker as it starts by default; every test the arguments select
#            (default: all of tests/). test_auth.py's two JWT tests skip themselves.
#   JWT      the broker with `--jwt-secret S`, pytest with JWT_SECRET=S: test_auth.py's
#            tests only (its two JWT tests run, its no-auth one skips itself; the
#            conftest deselects the rest, which call the broker without a token).
# The arguments go to both runs; when they select no test of test_auth.py, the JWT
# run says so and does not fail.
#
# The suite ships without its conftest.py: .ci/python/conftest.py (the `client`
# fixture, every queue deleted before each test) is copied into the unpacked tests/.
# The client and the runner are pinned in .ci/python/requirements.txt and installed in
# a venv under target/official-python (kept while the pins do not change).
#
# It exits non-zero on any failed test, but for the exceptions below: tests that
# contradict ../shared/spec/transaction.md (which wins on what the broker does),
# deselected in both runs. Each entry is "NODE ID|why", the why on one line, e.g.
#   "tests/test_pop.py::test_name|transaction.md: <the rule it contradicts>"
EXCEPTIONS=(
  # none yet
)
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=2.6.0
SDIST_SHA256=c6657ad706ef5d9a826d9fb7e576cd8d27e70489f21a0b9230e29a78beccce88
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
WORK="$PWD/target/official-python"
VENV="$WORK/venv"
SUITE="$WORK/suite"
START=$SECONDS
mkdir -p "$WORK"

echo "== venv ($PYTHON) with .ci/python/requirements.txt"
PINS=$(sha256sum .ci/python/requirements.txt | cut -d' ' -f1)
if [ "$(cat "$VENV/.pins" 2>/dev/null)" != "$PINS" ]; then
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r .ci/python/requirements.txt
  echo "$PINS" >"$VENV/.pins"
fi

echo "== queen-mq $VERSION source distribution (its tests/)"
SDIST="$WORK/queen_mq-$VERSION.tar.gz"
if ! echo "$SDIST_SHA256  $SDIST" | sha256sum --check --status 2>/dev/null; then
  rm -f "$SDIST"
  "$VENV/bin/pip" download --quiet --disable-pip-version-check --no-deps \
    --no-binary :all: "queen-mq==$VERSION" -d "$WORK"
  echo "$SDIST_SHA256  $SDIST" | sha256sum --check
fi
# Only the tests and the pytest settings (pyproject.toml: asyncio_mode = "auto"): the
# client under test is the installed one, not the sdist's own `queen/` next to them.
rm -rf "$SUITE"
mkdir -p "$SUITE"
tar -xzf "$SDIST" -C "$SUITE" --strip-components=1 \
  "queen_mq-$VERSION/tests" "queen_mq-$VERSION/pyproject.toml"
cp .ci/python/conftest.py "$SUITE/tests/conftest.py"

DESELECT=()
for e in "${EXCEPTIONS[@]}"; do DESELECT+=(--deselect "${e%%|*}"); done

. .ci/broker.sh
broker_build
trap broker_stop EXIT

# run NAME [ENV ...]: pytest in the suite against $BROKER_URL with the script's
# arguments; its exit code in RC_<NAME>, its report in $WORK/NAME.xml.
run() {
  local name=$1
  shift
  rm -f "$WORK/$name.xml"
  set +e
  (cd "$SUITE" && env -u JWT_SECRET QUEEN_URL="$BROKER_URL" QUEEN_SERVER_URL="$BROKER_URL" "$@" \
    timeout 1200 "$VENV/bin/pytest" -p no:cacheprovider -rfEs --timeout=120 \
    --junitxml="$WORK/$name.xml" "${DESELECT[@]}" "${PYTEST_ARGS[@]}")
  printf -v "RC_$name" '%s' $?
  set -e
}
PYTEST_ARGS=("$@")

echo "== run 1 of 2: no auth"
broker_start "$WORK/broker-noauth.log"
run noauth
broker_stop

echo "== run 2 of 2: --jwt-secret, test_auth.py with JWT_SECRET"
SECRET=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(24))')
# The suite's tokens carry no `tenant` claim (tests/test_auth.py `_make_token`): the
# broker refuses such a token unless the operator names a default tenant.
broker_start "$WORK/broker-jwt.log" --jwt-secret "$SECRET" --jwt-default-tenant default
run jwt JWT_SECRET="$SECRET"
broker_stop

echo "== official Python client (queen-mq $VERSION): summary"
# Counts from pytest's JUnit reports; pytest's exit codes: 0 all passed, 1 some
# failed, 5 none selected (a failure unless arguments chose the tests), else broken.
"$VENV/bin/python" - "$WORK" "$RC_noauth" "$RC_jwt" "$#" "$((SECONDS - START))" "${EXCEPTIONS[@]}" <<'PY'
import sys
import xml.etree.ElementTree as ET

work, rc_noauth, rc_jwt, nargs, secs = sys.argv[1:6]
exceptions = sys.argv[6:]
runs = [("no auth", "noauth", int(rc_noauth)), ("JWT", "jwt", int(rc_jwt))]
ok = True
total = {"passed": 0, "failed": 0, "skipped": 0}
for label, name, rc in runs:
    try:
        cases = list(ET.parse(f"{work}/{name}.xml").iter("testcase"))
    except (OSError, ET.ParseError):
        cases = None
    if cases is not None and rc != 5:
        passed, failed, skipped = [], [], []
        for case in cases:
            node = case.get("classname", "").replace(".", "/") + ".py::" + case.get("name", "")
            kids = {child.tag for child in case}
            if kids & {"failure", "error"}:
                failed.append(node)
            elif "skipped" in kids:
                skipped.append(node)
            else:
                passed.append(node)
        print(f"  {label:8} {len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
        for node in failed:
            print(f"           FAILED {node}")
        total["passed"] += len(passed)
        total["failed"] += len(failed)
        total["skipped"] += len(skipped)
        ok = ok and not failed
    if rc == 5:
        print(f"  {label:8} no test selected" + ("" if nargs != "0" else ": a failure without arguments"))
        ok = ok and nargs != "0"
    elif rc not in (0, 1) or cases is None:
        why = "timed out after 20 min" if rc == 124 else "no report" if cases is None else "a broken run"
        print(f"  {label:8} pytest exited {rc}: {why}")
        ok = False
print("  exceptions (deselected in both runs):" + ("" if exceptions else " none"))
for e in exceptions:
    node, _, why = e.partition("|")
    print(f"    {node}: {why}")
if not ok:
    print(f"  the brokers' logs: {work}/broker-noauth.log, {work}/broker-jwt.log")
print(f"  {int(secs) // 60} min {int(secs) % 60} s")
print(f"python: {total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
sys.exit(0 if ok else 1)
PY
