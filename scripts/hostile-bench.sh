#!/bin/sh
# Time and peak RSS of zflow on the hostile files of issue 12 and their
# normal twins (bench/hostile), for BENCHMARKS.md:
#
#   scripts/hostile-bench.sh [ZFLOW_BINARY] [DIR]
#
# writes the files into DIR (default /tmp/hostile; about 1.1 GiB) unless
# they are there, then prints one line per command: seconds, peak RSS in
# MiB, exit code. Needs GNU time at /usr/bin/time.
set -eu
ZFLOW=${1:-bin/zflow}
DIR=${2:-/tmp/hostile}
[ -f "$DIR/calls1e4.npz" ] || go run ./bench/hostile -o "$DIR"
run() {
	/usr/bin/time -f "%e %M %x" -o "$DIR/.time" "$ZFLOW" "$@" >/dev/null 2>&1 || true
	# the last line: GNU time puts "Command exited with non-zero status" first
	set -- $(tail -n 1 "$DIR/.time") "$@"
	s=$1 kb=$2 rc=$3
	shift 3
	printf '%8s s %8d MiB  exit %s  zflow %s\n' "$s" "$((kb / 1024))" "$rc" "$*"
}
cd "$DIR"
run inspect deep.npz
run inspect flat.npz
run stats bomb.npz
run stats stored.npz
run inspect --stats bomb.npz
run inspect --stats stored.npz
run inspect bomb4.npz
run inspect overlap.npz
run inspect calls1e6.npz
run inspect calls1e4.npz
run inspect --stats calls1e6.npz
run inspect --stats calls1e4.npz
run inspect --format json calls1e6.npz
run inspect --format json calls1e4.npz
