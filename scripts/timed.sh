#!/usr/bin/env bash
# timed.sh NAME [VAR=value ...] COMMAND [ARG ...]
#
# Runs COMMAND (with the environment assignments before it, as `env` takes
# them) and then prints "NAME: W s wall, C s CPU" with COMMAND's exit status
# kept.  The CPU is that of every process COMMAND started, where the machine
# lets this script count it: as root with cgroup v1's cpuacct controller (a
# Debian container, this project's CI), the run gets a cgroup of its own,
# which also counts Chromium's processes (Playwright starts them in a
# session of their own, and a shell's `time` never sees them: it reported
# 151 CPU-seconds for a browser suite that used 417).  Elsewhere it falls
# back to the shell's count of waited-for children, and says so.
set -u
name=$1
shift
group=""
for root in /sys/fs/cgroup/cpuacct /sys/fs/cgroup/cpu,cpuacct; do
    if [ -w "$root" ] && [ -f "$root/cpuacct.usage" ]; then
        group="$root/backprop-lessons-$name-$$"
        if mkdir "$group" 2>/dev/null && echo $$ >"$group/cgroup.procs" 2>/dev/null; then
            break
        fi
        rmdir "$group" 2>/dev/null
        group=""
    fi
done
start=$(date +%s%N)
env "$@"
status=$?
wall=$((($(date +%s%N) - start) / 1000000000))
if [ -n "$group" ]; then
    cpu="$(($(cat "$group/cpuacct.usage") / 1000000000)) s CPU (every process)"
    echo $$ >"$(dirname "$group")/cgroup.procs"
    rmdir "$group" 2>/dev/null # still busy while a stray process lives
else
    # `times` prints the shell's own user and system time, then its
    # children's (run in this shell: a subshell's children are its own)
    counts=$(mktemp)
    times >"$counts"
    cpu=$(tail -n 1 "$counts" | awk '{
        split($1, u, "m"); split($2, s, "m")
        printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
    rm -f "$counts"
    cpu="$cpu s CPU (waited-for processes only)"
fi
echo "$name: $wall s wall, $cpu"
exit $status
