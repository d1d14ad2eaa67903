#!/usr/bin/env bash
# A worker whose behaviour is chosen per rank by BEHAVE_<RANK> (default: BEHAVE_DEFAULT):
#   ok | ok-after:SECONDS | exit:N | segv | sleep | ready-sleep | sleep-ignore-term | traps | grandchild | setsid-grandchild
#   | exit-when-ready:N | exit-after-others:N | fail-first-attempt | print-lines:N | partial | progress | oom
#   | both (a line to stdout, one to stderr) | read-stdin | list-fds | usr1-child | exec-sleep | spam-ignore-term | fail-until:N
#   | ready-until-go (marks ready, finishes once $OUT_DIR/go exists) | int-exit (exits 3 on SIGINT) | fail-in-attempt:A:N (runs until stopped before attempt A, exits N
#   in it, finishes after it) | sleep-until-attempt:A (runs until stopped before attempt A, finishes
#   from it on) | sleep-while-world:N (runs until stopped while WORLD_SIZE is N; in another world,
#   finishes once $OUT_DIR/go exists); each finish writes done.<attempt>.<rank>:
#   "world=W restart=<attempt>"
# Every worker writes its pid to $OUT_DIR/pid.$RANK first.
# Processes it leaves behind carry $MARKER in their command line so the test can find them.
set -u
RANK=${RANK:-0} WORLD_SIZE=${WORLD_SIZE:-1}  # accel launch starts a single process as accelerate does: without them
var="BEHAVE_$RANK"
what=${!var:-${BEHAVE_DEFAULT:-ok}}
mark() { touch "$OUT_DIR/$1.$RANK"; }
alive() { local st; st=$(cut -d" " -f3 "/proc/$1/stat" 2>/dev/null) && [ "$st" != Z ]; }  # a zombie has ended
echo $$ >"$OUT_DIR/pid.$RANK"
mark started
case $what in
ok) echo "rank $RANK ok" ;;
both) echo "rank $RANK out"; echo "rank $RANK err" >&2 ;;
exit:*) echo "rank $RANK failing" >&2; echo "second line" >&2; exit "${what#exit:}" ;;
segv) kill -SEGV $$ ;;
sleep) while :; do sleep 0.05; done ;;
ready-sleep) mark ready; while :; do sleep 0.05; done ;;
ready-until-go) mark ready; while [ ! -e "$OUT_DIR/go" ]; do sleep 0.05; done; echo "rank $RANK ok" ;;
ok-after:*) sleep "${what#ok-after:}"; echo "rank $RANK ok" ;;
sleep-ignore-term) trap 'mark term' TERM; mark ready; while :; do sleep 0.05; done ;;
exit-after-others:*)  # exits N once every other rank ran and ended (their pids, this machine's /proc)
  for r in $(seq 0 $((WORLD_SIZE - 1))); do
    [ "$r" = "$RANK" ] && continue
    while [ ! -s "$OUT_DIR/pid.$r" ]; do sleep 0.01; done
    while alive "$(cat "$OUT_DIR/pid.$r")"; do sleep 0.01; done
  done
  echo "rank $RANK failing" >&2; exit "${what#exit-after-others:}" ;;
exit-when-ready:*)  # exits once every other rank reported ready
  while [ "$(ls "$OUT_DIR" | grep -c '^ready\.')" -lt $((WORLD_SIZE - 1)) ]; do sleep 0.01; done
  echo "rank $RANK failing" >&2; exit "${what#exit-when-ready:}" ;;
int-exit) trap 'mark int; exit 3' INT; mark ready; while :; do sleep 0.05; done ;;
traps)
  trap 'mark int' INT; trap 'mark term' TERM; trap 'mark usr1' USR1; trap 'mark hup' HUP
  mark ready; while :; do sleep 0.05; done ;;
usr1-then-exit) trap 'mark usr1; exit 0' USR1; mark ready; while :; do sleep 0.05; done ;;
grandchild)
  bash -c "exec -a 'sleep-$MARKER' sleep 1000" & mark grandchild
  [ "${GRANDCHILD_THEN:-ok}" = fail ] && exit 4
  [ "${GRANDCHILD_THEN:-ok}" = sleep ] && while :; do sleep 0.05; done
  echo done ;;
setsid-grandchild)  # exits once the grandchild runs in a session of its own
  setsid bash -c "touch '$OUT_DIR/grandchild.$RANK'; exec -a 'sleep-$MARKER' sleep 1000" &
  while [ ! -e "$OUT_DIR/grandchild.$RANK" ]; do sleep 0.01; done; echo done ;;
fail-first-attempt)
  echo "attempt $TORCHELASTIC_RESTART_COUNT"
  [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && { echo "first attempt fails" >&2; exit 5; }
  exit 0 ;;
print-lines:*)
  for i in $(seq 1 "${what#print-lines:}"); do echo "rank=$RANK line=$i $(printf 'x%.0s' $(seq 1 200))"; done ;;
partial) printf 'no newline at the end' ;;
progress) for i in 1 2 3; do printf '\rprogress %d/3' "$i"; sleep 0.01; done; printf '\n' ;;
oom) /usr/bin/python3 -c 'x = bytearray(1 << 30); x2 = bytearray(1 << 30); print(len(x))' ;;
read-stdin) line=; read -r line || true; echo "stdin=[$line]" ;;
list-fds) echo "fds=$(ls /proc/self/fd | tr '\n' ' ')" ;;  # ls's own: 0 1 2 and its directory
usr1-child)
  # A child with SIGUSR1's default action (death) that answers SIGUSR2 by a file: on SIGUSR1 the
  # worker asks it whether it is alive; it dies if SIGUSR1 went to the whole process group.
  bash -c "trap 'touch \"$OUT_DIR/pong.$RANK\"' USR2; while :; do sleep 0.05; done" & child=$!
  trap 'kill -USR2 $child
    while [ ! -e "$OUT_DIR/pong.$RANK" ] && alive $child; do sleep 0.01; done
    [ -e "$OUT_DIR/pong.$RANK" ] && mark child-alive || mark child-died; kill $child; exit 0' USR1
  mark ready; while :; do sleep 0.05; done ;;
spam-ignore-term)  # writes lines as fast as the agent takes them, ignoring SIGTERM
  trap 'mark term' TERM; mark ready; line=$(printf 'y%.0s' $(seq 1 200)); while :; do echo "$line"; done ;;
fail-until:*)  # fails every attempt before attempt N; rank 0 records the agent's descriptors and RSS
  attempt=$TORCHELASTIC_RESTART_COUNT
  touch "$OUT_DIR/up.$attempt.$RANK"
  if [ "$RANK" = 0 ]; then  # once every rank of the attempt runs: the agent's steady state
    while [ "$(ls "$OUT_DIR" | grep -c "^up\.$attempt\.")" -lt "$WORLD_SIZE" ]; do sleep 0.01; done
    echo "$attempt $(ls /proc/$PPID/fd | wc -l) $(awk '/^VmRSS/{print $2}' /proc/$PPID/status)" >>"$OUT_DIR/agent_stats"
    touch "$OUT_DIR/measured.$attempt"
  fi
  while [ ! -e "$OUT_DIR/measured.$attempt" ]; do sleep 0.01; done
  [ "$attempt" -ge "${what#fail-until:}" ] && exit 0
  [ "$RANK" = 0 ] && exit 3
  while :; do sleep 0.05; done ;;
fail-in-attempt:*)
  spec=${what#fail-in-attempt:} attempt=$TORCHELASTIC_RESTART_COUNT
  if [ "$attempt" -lt "${spec%%:*}" ]; then mark ready; while :; do sleep 0.05; done; fi
  if [ "$attempt" = "${spec%%:*}" ]; then echo "rank $RANK fails in attempt $attempt" >&2; exit "${spec#*:}"; fi
  echo "world=$WORLD_SIZE restart=$attempt" >"$OUT_DIR/done.$attempt.$RANK" ;;
sleep-until-attempt:*)
  attempt=$TORCHELASTIC_RESTART_COUNT
  if [ "$attempt" -lt "${what#sleep-until-attempt:}" ]; then mark ready; while :; do sleep 0.05; done; fi
  echo "world=$WORLD_SIZE restart=$attempt" >"$OUT_DIR/done.$attempt.$RANK" ;;
sleep-while-world:*)
  if [ "$WORLD_SIZE" = "${what#sleep-while-world:}" ]; then mark ready; while :; do sleep 0.05; done; fi
  mark up; while [ ! -e "$OUT_DIR/go" ]; do sleep 0.02; done
  echo "world=$WORLD_SIZE restart=$TORCHELASTIC_RESTART_COUNT" >"$OUT_DIR/done.$TORCHELASTIC_RESTART_COUNT.$RANK" ;;
exec-sleep) mark ready; exec -a "sleep-$MARKER" sleep 1000 ;;  # runs on without forking
*) echo "unknown behaviour $what" >&2; exit 99 ;;
esac
