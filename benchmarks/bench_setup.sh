#!/usr/bin/env bash
# Setup timings of issue 25: from a fresh clone with EMPTY pip and uv caches (fresh temp dirs, the machine's own
# caches untouched), how long until `make run` serves HTTP, until `make test` reaches its first test, and the whole
# `make test`; and whether two fresh installs give the same `pip freeze`. Prints one line per run and a summary
# (medians); docs/benchmarks.md, Setup, records the figures.
#
#   bash benchmarks/bench_setup.sh [--runs N] [--full] [--burn N] [--repo PATH] [--branch NAME]
#
#   --runs N     fresh clones to time (default 2; the freeze comparison needs 2)
#   --full       also wait for each `make test` to finish and time it (else it is stopped at its first test)
#   --burn N     keep N CPU-burning processes running throughout, to time on a busy machine (default 0)
#   --repo PATH  the repository to clone (default: this checkout's); --branch NAME (default: its current branch)
#
# Each clone lands in its own temp folder with nothing beside it (no ../shared). PLANNING_HOME is a fresh temp dir
# and the workbench serves on a free port (STREAMLIT_SERVER_PORT), so nothing on the machine is disturbed.
set -euo pipefail

RUNS=2; FULL=0; BURN=0
REPO="$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)"
BRANCH="$(git -C "$REPO" rev-parse --abbrev-ref HEAD)"
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    --full) FULL=1; shift ;;
    --burn) BURN="$2"; shift 2 ;;
    --repo) REPO="$2"; shift 2 ;;
    --branch) BRANCH="$2"; shift 2 ;;
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/bench-setup.XXXXXX")"
BURNERS=(); GROUPS_TO_STOP=()
cleanup() {
  for pg in "${GROUPS_TO_STOP[@]}"; do kill -TERM -- "-$pg" 2>/dev/null || true; done
  for pid in "${BURNERS[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
for _ in $(seq 1 "$BURN"); do
  python3 -c 'while True: pass' & BURNERS+=("$!")
done
# the 1-minute load average every 5 s while the runs go on (what else the machine was doing)
(while true; do cut -d' ' -f1 /proc/loadavg >>"$WORK/load.txt"; sleep 5; done) & BURNERS+=("$!")

now() { python3 -c 'import time; print(f"{time.monotonic():.2f}")'; }
since() { python3 -c "print(f'{$(now) - $1:.1f}')"; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
load() { cut -d' ' -f1 /proc/loadavg; }
# Start a command in its own process group (so that it and everything it spawned can be stopped), output to $2,
# its exit code to $2.rc when it ends; prints the group id
start_group() { setsid bash -c "$1; echo \$? >'$2.rc'" >"$2" 2>&1 < /dev/null & echo $!; }
stop_group() { kill -TERM -- "-$1" 2>/dev/null || true; sleep 1; kill -KILL -- "-$1" 2>/dev/null || true; }

echo "bench_setup: $RUNS run(s) of $REPO@$BRANCH, burners $BURN, $(nproc) cores, python3 $(python3 -V | cut -d' ' -f2)"
echo "run | make run serving (s) | make test at first test (s) | whole make test (s) | load at its start | result"
declare -a T_RUN T_FIRST T_FULL
for i in $(seq 1 "$RUNS"); do
  dir="$WORK/run$i"; mkdir -p "$dir/pip-cache" "$dir/uv-cache" "$dir/home"
  git clone -q --branch "$BRANCH" "$REPO" "$dir/planning"
  # (unbuffered: the first test line reaches the log when it is printed)
  export PIP_CACHE_DIR="$dir/pip-cache" UV_CACHE_DIR="$dir/uv-cache" PLANNING_HOME="$dir/home" PYTHONUNBUFFERED=1
  port="$(free_port)"; load0="$(load)"

  # 1. make run until the server answers HTTP (Streamlit's health endpoint, then the page itself)
  t0="$(now)"
  pg="$(cd "$dir/planning" && STREAMLIT_SERVER_PORT=$port start_group "make run" "$dir/run.log")"
  GROUPS_TO_STOP+=("$pg")
  until curl -fs "http://127.0.0.1:$port/_stcore/health" >/dev/null 2>&1 \
        && curl -fs "http://127.0.0.1:$port/" | grep -qi "<html"; do
    if ! kill -0 "$pg" 2>/dev/null; then echo "make run stopped; see $dir/run.log" >&2; tail -20 "$dir/run.log" >&2; exit 1; fi
    if [ "$(python3 -c "print(int($(now) - $t0))")" -gt 1200 ]; then echo "make run: no answer in 20 min" >&2; exit 1; fi
    sleep 0.5
  done
  T_RUN[$i]="$(since "$t0")"
  stop_group "$pg"
  (cd "$dir/planning" && .venv/bin/python -m pip freeze --exclude-editable) >"$dir/freeze-run.txt"

  # 2. make test until pytest reports its first test file (pip freeze of the dev set is taken after)
  t0="$(now)"
  pg="$(cd "$dir/planning" && start_group "make test" "$dir/test.log")"
  GROUPS_TO_STOP+=("$pg")
  until grep -qE '^tests/[^ ]+\.py ' "$dir/test.log" 2>/dev/null; do
    if ! kill -0 "$pg" 2>/dev/null; then echo "make test stopped before its first test; see $dir/test.log" >&2; tail -30 "$dir/test.log" >&2; exit 1; fi
    sleep 0.5
  done
  T_FIRST[$i]="$(since "$t0")"
  result="stopped at the first test"
  if [ "$FULL" = 1 ]; then
    until [ -s "$dir/test.log.rc" ]; do sleep 2; done
    T_FULL[$i]="$(since "$t0")"; rc="$(cat "$dir/test.log.rc")"
    result="exit $rc: $(grep -E '^=+ .*(passed|failed).* =+$' "$dir/test.log" | tail -1 | tr -d '=' | xargs)"
  else
    stop_group "$pg"; T_FULL[$i]="-"
  fi
  (cd "$dir/planning" && .venv/bin/python -m pip freeze --exclude-editable) >"$dir/freeze-test.txt"
  echo "$i | ${T_RUN[$i]} | ${T_FIRST[$i]} | ${T_FULL[$i]} | $load0 | $result"
done

median() { python3 -c 'import statistics, sys; v = [float(x) for x in sys.argv[1:] if x != "-"]; print(f"{statistics.median(v):.1f}" if v else "-")' "$@"; }
echo "median | $(median "${T_RUN[@]}") | $(median "${T_FIRST[@]}") | $(median "${T_FULL[@]}") | |"
# shellcheck disable=SC2046
echo "1-min load average while timing (every 5 s): median $(median $(cat "$WORK/load.txt")), max $(sort -g "$WORK/load.txt" | tail -1) on $(nproc) cores"
echo "packages: runtime $(wc -l <"$WORK/run1/freeze-run.txt") (+ the project), dev $(wc -l <"$WORK/run1/freeze-test.txt")"
if [ "$RUNS" -ge 2 ]; then
  same=1
  for i in $(seq 2 "$RUNS"); do
    for set in run test; do
      cmp -s "$WORK/run1/freeze-$set.txt" "$WORK/run$i/freeze-$set.txt" || { same=0; diff "$WORK/run1/freeze-$set.txt" "$WORK/run$i/freeze-$set.txt" || true; }
    done
  done
  [ "$same" = 1 ] && echo "pip freeze (--exclude-editable): identical across the $RUNS fresh installs, runtime and dev sets" \
                  || echo "pip freeze differs between fresh installs (diff above)"
fi
echo "logs and freezes: $WORK"
