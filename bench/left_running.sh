#!/usr/bin/env bash
# left_running.sh TAG: after the benchmarks (meson's last benchmark, run
# alone): fails, naming them, when a process whose command line names a lab
# directory of this build's runs (rackgate-lab.TAG.*, firmware-tests/lab.sh
# lab_init with LAB_RUN_TAG=TAG) is still running: a daemon, an nginx or a
# swtpm a benchmark started and did not stop. It stops each one it reports,
# by its PID, so that one leak does not outlive this check either.
set -euo pipefail
tag="${1:?usage: left_running.sh TAG}"
left=()
for d in /proc/[0-9]*; do
  pid="${d#/proc/}"
  [[ "$pid" == "$$" ]] && continue
  cmd="$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)" || continue
  [[ "$cmd" == *"rackgate-lab.$tag."* ]] || continue
  [[ "$cmd" == *left_running.sh* ]] && continue
  left+=("$pid")
  echo "left running: $pid $cmd" >&2
done
if [[ ${#left[@]} -eq 0 ]]; then
  echo "benchmarks: nothing they started is still running"
  exit 0
fi
for pid in "${left[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
sleep 1
for pid in "${left[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
echo "benchmarks: ${#left[@]} processes they started were still running (stopped now)" >&2
exit 1
