#!/bin/bash
# Multi-host hyctl train under torchrun, with real processes on separate
# hosts: three network namespaces made here (a bridge in a "switch"
# namespace, a veth and an address of its own per host, nothing configured
# in the root namespace), each host with its own hostname (UTS namespace),
# its own /etc/hosts view and its own directory tree under the work dir.
# 3 hosts x 2 ranks are launched by Debian's torchrun (c10d rendezvous on
# host 0, --no_python running hyctl train). Once a checkpoint version is
# committed, host 2 is lost whole: every process in its namespace is
# SIGKILLed and its directory deleted. The job must re-form on the 2 hosts
# left (4 ranks), recover from the replicas, finish (both agents exit 0),
# and every committed version must verify.
#
# Usage: multihost_test.sh HYCTL WORKDIR
#   exit 0 pass, 77 skip (no root / netns / torchrun), anything else fail.
# Environment:
#   HY_MULTIHOST_SOAK=N        opt-in soak: N host losses in a row (host 1
#                              and 2 alternately), each followed by a fresh
#                              host joining in its place.
#   HY_MULTIHOST_ITERATIONS=N  total PPO iterations (default: sized for the
#                              number of losses).
#   HY_MULTIHOST_LOSS=cut      cut the lost host's link before killing it,
#                              so that no FIN/RST reaches its peers (a host
#                              losing power, not its processes dying):
#                              peers must notice by timeouts (heartbeats).
#                              Default "kill": processes SIGKILLed, their
#                              sockets reset by the kernel.
#   HY_MULTIHOST_KEEP=1        keep the work dir on success too.
#   HY_MULTIHOST_PHASE_TIMEOUT=S  seconds each wait may take (150).
#   HY_TORCHRUN=PATH           torchrun (CTest passes the one beside the
#                              build's python; default: torchrun on PATH).
#
# torchrun, as this test found it (Debian's 1.13 first, PyPI's 2.x since):
# - --redirects 1 --tee 2 puts stdout in a file and stderr in a file and on
#   the agent's console (1.13 on Python 3.11 crashed on the default 0).
# - After a host dies, the agents left re-rendezvous only once its
#   rendezvous keep-alive expires: 5 s x 3 attempts, hard-coded (not in
#   rdzv_conf), then last_call_timeout: about 15-18 s after the loss.
# - A host joining a complete round waits for the next; the agents running
#   notice it within --monitor_interval and restart their workers (not
#   counted against --max_restarts, and TORCHELASTIC_RESTART_COUNT is not
#   bumped; the new host's agent starts at 0).
# - MASTER_ADDR is the hostname of the rank-0 agent, so every host must
#   resolve every hostname: /etc/hosts is bind-mounted per host.

set -u
set -o pipefail

HYCTL_IN=${1:?usage: multihost_test.sh HYCTL WORKDIR}
WORKDIR=${2:?usage: multihost_test.sh HYCTL WORKDIR}
TORCHRUN=${HY_TORCHRUN:-$(command -v torchrun)}
SOAK=${HY_MULTIHOST_SOAK:-0}
LOSSES=$((SOAK > 0 ? SOAK : 1))
NPROC=2                      # Ranks per host.
SAVE_EVERY=2
HEARTBEAT_MS=3000
RDZV_PORT=29400
RDZV_ID=mh$$
# torchrun counts failures only (a membership change is free): a loss, and
# possibly a failed first start when a fresh host joins.
MAX_RESTARTS=$((3 * LOSSES + 3))
# rdzv_conf: last_call_timeout is the wait for more hosts once 2 are in
# (start-up and every re-rendezvous pay it); join_timeout bounds a
# rendezvous; is_host is explicit (host 0 serves the c10d store).
RDZV_CONF_COMMON=join_timeout=120,last_call_timeout=3,read_timeout=60
if [[ -n ${HY_MULTIHOST_ITERATIONS:-} ]]; then
  ITERATIONS=$HY_MULTIHOST_ITERATIONS
elif ((SOAK > 0)); then
  # Each loss and rejoin takes about 12 iterations on this 2-core machine
  # (the 4-rank world trains on while the fresh host starts up).
  ITERATIONS=$((12 + 16 * SOAK))
else
  ITERATIONS=14
fi
LOSS_MODE=${HY_MULTIHOST_LOSS:-kill}
[[ $LOSS_MODE == kill || $LOSS_MODE == cut ]] ||
  { echo "HY_MULTIHOST_LOSS: kill or cut" >&2; exit 2; }
PHASE_TIMEOUT=${HY_MULTIHOST_PHASE_TIMEOUT:-150}  # Seconds per wait.

skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
note() { echo "[$(since)] $*"; }

# --- clock (no forks: bash's EPOCHREALTIME) --------------------------------
usec() { local t=${1:-$EPOCHREALTIME}; echo "${t/./}"; }
T0=$(usec)
# Seconds since T0 of an EPOCHREALTIME stamp (default now), as S.mmm.
since() {
  local d=$(($(usec "${1:-$EPOCHREALTIME}") - T0))
  printf '%d.%03d' $((d / 1000000)) $(((d % 1000000) / 1000))
}

# --- preconditions ------------------------------------------------------------
[[ $(id -u) -eq 0 ]] || skip "needs root (CAP_NET_ADMIN) to create network namespaces"
command -v ip >/dev/null || skip "no ip(8) (iproute2)"
command -v unshare >/dev/null || skip "no unshare(1)"
[[ -x $TORCHRUN ]] || skip "no torchrun at $TORCHRUN (scripts/install-deps.sh makes .venv/bin/torchrun)"
[[ -x $HYCTL_IN ]] || fail "no hyctl at $HYCTL_IN"

SUF=$$
NS_SW=hy-sw-$SUF
ns_of() { echo "hy-h$1-$SUF"; }
# A /24 of our own, from the pid (the namespaces are private anyway).
NET=10.$((100 + SUF % 100)).$(((SUF / 100) % 250 + 1))
addr_of() { echo "$NET.$(($1 + 1))"; }

WORK=$WORKDIR/multihost-$SUF
rm -rf "$WORK"
mkdir -p "$WORK/bin" || fail "cannot create $WORK"

declare -A AGENT_PID=()  # host -> pid of its torchrun agent
declare -A AGENT_RC=()   # host -> exit status, once reaped
VETH_GEN=0
OK=0

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -- "-$SUF\$"); do
    kill_ns_pids "$ns"
    ip netns del "$ns" 2>/dev/null
  done
  local h
  for h in "${!AGENT_PID[@]}"; do wait "${AGENT_PID[$h]}" 2>/dev/null; done
  if [[ $rc -eq 77 || ( $OK -eq 1 && -z ${HY_MULTIHOST_KEEP:-} ) ]]; then
    rm -rf "$WORK"
  elif [[ $rc -ne 77 ]]; then
    echo "logs kept in $WORK: hostI/agent.log (torchrun), hostI/wlog/<start>-r<RANK>-w<WORLD>.{out,err} (workers, stamped), hostI/logs/ (torchrun's per-attempt logs)" >&2
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# SIGKILLs every process in namespace $1 until none is left.
kill_ns_pids() {
  local pids i
  for i in $(seq 1 50); do
    pids=$(ip netns pids "$1" 2>/dev/null)
    [[ -z $pids ]] && return 0
    kill -9 $pids 2>/dev/null
    sleep 0.1
  done
  echo "warning: processes left in $1: $pids" >&2
}

# --- network ------------------------------------------------------------------
# Namespaces left by an earlier run that was killed outright (a CTest
# timeout sends SIGKILL, so its trap never ran): their pid is gone.
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' |
  grep -E '^hy-(sw|h[0-9]+)-[0-9]+$'); do
  pid=${ns##*-}
  if [[ $pid != "$SUF" ]] && ! kill -0 "$pid" 2>/dev/null; then
    kill_ns_pids "$ns"
    ip netns del "$ns" 2>/dev/null && echo "removed stale namespace $ns"
  fi
done
ip netns add "$NS_SW" 2>/dev/null ||
  skip "cannot create a network namespace (ip netns add: no CAP_NET_ADMIN?)"
ip -n "$NS_SW" link set lo up &&
  ip -n "$NS_SW" link add br0 type bridge &&
  ip -n "$NS_SW" link set br0 up ||
  skip "cannot create a bridge in a network namespace (no CAP_NET_ADMIN?)"

# Host $1's namespace: lo up, eth0 (a veth whose peer is on the bridge) with
# its address. A host that comes back gets a new namespace and veth.
add_host_net() {
  local i=$1 ns
  ns=$(ns_of "$i")
  VETH_GEN=$((VETH_GEN + 1))
  local port=p$i-$VETH_GEN
  ip netns add "$ns" &&
    ip -n "$ns" link set lo up &&
    ip -n "$NS_SW" link add "$port" type veth peer name eth0 netns "$ns" &&
    ip -n "$NS_SW" link set "$port" master br0 &&
    ip -n "$NS_SW" link set "$port" up &&
    ip -n "$ns" addr add "$(addr_of "$i")/24" dev eth0 &&
    ip -n "$ns" link set eth0 up
}

for i in 0 1 2; do
  add_host_net "$i" || skip "cannot set up host $i's namespace and veth"
done
ip netns exec "$(ns_of 0)" unshare --uts true 2>/dev/null ||
  skip "cannot create a UTS namespace (unshare --uts) for per-host hostnames"

# Every host resolves every hostname to its address (bound over /etc/hosts
# in the host's private mount namespace, which ip netns exec provides):
# torchrun's MASTER_ADDR is the fqdn of the rank-0 agent's host, and gloo
# binds to the address its hostname resolves to.
{
  echo "127.0.0.1 localhost"
  for i in 0 1 2; do echo "$(addr_of "$i") host$i"; done
} >"$WORK/hosts"

# Runs "$@" on host $1: its namespace, hostname hostI, its /etc/hosts.
on_host() {
  local i=$1
  shift
  ip netns exec "$(ns_of "$i")" unshare --uts -- bash -c '
    mount --bind "$1" /etc/hosts || exit 90
    hostname "$2" || exit 91
    shift 2
    exec "$@"' on_host "$WORK/hosts" "host$i" "$@"
}

on_host 0 true 2>/dev/null ||
  skip "cannot bind-mount /etc/hosts or set the hostname in a host's namespaces"

# Connectivity: every host reaches host 0's address over TCP (a listener
# in host 0, bash /dev/tcp from each host).
PY=$(head -1 "$TORCHRUN" | sed -n 's/^#! *//p' | awk '{print $1}')
[[ -x $PY ]] || PY=python3
on_host 0 "$PY" -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(8); s.settimeout(20)
for _ in range(3):
    c, _ = s.accept(); c.sendall(b"ok\n"); c.close()
' "$(addr_of 0)" "$RDZV_PORT" &
LISTENER=$!
for i in 0 1 2; do
  reply=""
  for try in $(seq 1 50); do
    reply=$(on_host "$i" timeout 2 bash -c \
      "exec 3<>/dev/tcp/$(addr_of 0)/$RDZV_PORT && head -1 <&3" 2>/dev/null)
    [[ $reply == ok ]] && break
    sleep 0.2
  done
  [[ $reply == ok ]] || fail "host $i cannot reach host 0 ($(addr_of 0):$RDZV_PORT)"
  [[ $(on_host "$i" hostname) == "host$i" ]] || fail "host $i: hostname not set"
done
wait "$LISTENER" 2>/dev/null
note "network: switch $NS_SW (bridge br0), hosts $(ns_of 0) $(ns_of 1) $(ns_of 2) on $NET.0/24; all reach host0"

# --- the job -----------------------------------------------------------------
# The binary under test, copied: a rebuild cannot change it mid-run.
cp "$HYCTL_IN" "$WORK/bin/hyctl" || fail "cannot copy $HYCTL_IN"
HYCTL=$WORK/bin/hyctl

# torchrun's worker: hyctl itself (exec'd, so torchrun's signals and ours
# reach it), its stdout and stderr lines stamped with the wall clock, passed
# on to torchrun (its log dir) and appended to a file per worker process in
# the host's wlog/ (<start stamp>-r<RANK>-w<WORLD_SIZE>.{out,err}): torchrun
# names its log dirs attempt_<restart count>, which a membership change (a
# host joining) does not bump, so a re-formed world truncates the logs of
# the world before.
cat >"$WORK/bin/worker.sh" <<'EOF'
#!/bin/bash
log=$HY_MULTIHOST_LOGS/$EPOCHREALTIME-r$RANK-w$WORLD_SIZE
stamp() {
  exec 3>>"$1"
  while IFS= read -r l; do
    l="$EPOCHREALTIME $l"
    printf '%s\n' "$l"
    printf '%s\n' "$l" >&3
  done
}
mkdir -p "$HY_MULTIHOST_LOGS"
exec "$HY_MULTIHOST_HYCTL" "$@" > >(stamp "$log.out") 2> >(stamp "$log.err" >&2)
EOF
chmod +x "$WORK/bin/worker.sh"

TRAIN_ARGS=(train -o json --iterations "$ITERATIONS"
  --set model.hidden_size=64 --set model.intermediate_size=96
  --set trainer.sft_steps=2 --set rollout.batch_size=16
  --set actor.ppo_mini_batch_size=8
  --set checkpoint.save_every=$SAVE_EVERY --set checkpoint.keep_last=100
  --set checkpoint.replicas=1
  --set checkpoint.heartbeat_timeout_ms=$HEARTBEAT_MS)

# The README's torchrun command (its "Multi-node" block) is what each host
# runs: its placeholders filled (N -> 2:3 hosts, K -> NPROC, HOST0:29400 ->
# host 0's address, JOB, RUN_ROOT -> the host's tree), this test's flags
# added (rendezvous settings, logs, hyctl wrapped by worker.sh to stamp its
# lines, a small model) and the whole command printed, so that the README
# says what ran here.
SRC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
README_CMD=$(awk '/^```sh$/ {b = 1; next} /^```$/ {b = 0} b && /^torchrun /' \
  "$SRC_DIR/README.md" | head -1)
[[ -n $README_CMD ]] || fail "no torchrun command in $SRC_DIR/README.md"
read -ra README_ARGV <<<"$README_CMD"

# The command host $1 runs (into HOST_CMD), from README_ARGV.
host_command() {
  local i=$1 is_host=0 dir=$WORK/host$1 tok skip_next=0
  [[ $i -eq 0 ]] && is_host=1
  HOST_CMD=()
  for tok in "${README_ARGV[@]}"; do
    if ((skip_next)); then
      skip_next=0
      continue
    fi
    case $tok in
      torchrun) HOST_CMD+=("$TORCHRUN") ;;
      --nnodes=N) HOST_CMD+=(--nnodes=2:3) ;;
      --nproc_per_node=K) HOST_CMD+=(--nproc_per_node=$NPROC) ;;
      --rdzv_endpoint=HOST0:29400)
        HOST_CMD+=(--rdzv_endpoint="$(addr_of 0):$RDZV_PORT"
          --rdzv_conf="is_host=$is_host,$RDZV_CONF_COMMON") ;;
      --rdzv_id=JOB) HOST_CMD+=(--rdzv_id="$RDZV_ID") ;;
      --max_restarts=*) HOST_CMD+=(--max_restarts=$MAX_RESTARTS) ;;
      --no_python)
        HOST_CMD+=(--monitor_interval=1 --redirects 1 --tee 2
          --log_dir "$dir/logs" --no_python) ;;
      build/bin/hyctl) HOST_CMD+=("$WORK/bin/worker.sh") ;;
      train) HOST_CMD+=("${TRAIN_ARGS[@]}") ;;
      --iterations) skip_next=1 ;;  # TRAIN_ARGS has this test's.
      RUN_ROOT) HOST_CMD+=("$dir/run") ;;
      --rdzv_backend=c10d | --store) HOST_CMD+=("$tok") ;;
      *) fail "README.md's torchrun command has '$tok', which this test does not know how to run: update both" ;;
    esac
  done
}

# Starts host $1's torchrun agent (background) in a fresh directory tree.
launch_host() {
  local i=$1
  local dir=$WORK/host$i
  mkdir -p "$dir/run" "$dir/logs" "$dir/wlog"
  host_command "$i"
  note "host$i runs README.md's command: ${HOST_CMD[*]}"
  on_host "$i" env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR \
    -u MASTER_PORT -u HY_TRAIN_CONFIG_YAML -u HY_RUN_ID -u HY_NODE_ID \
    -u TORCHELASTIC_RUN_ID \
    HY_HOST_ID="host$i" GLOO_SOCKET_IFNAME=eth0 \
    HY_MULTIHOST_HYCTL="$HYCTL" HY_MULTIHOST_LOGS="$dir/wlog" \
    "${HOST_CMD[@]}" >"$dir/agent.log" 2>&1 &
  AGENT_PID[$i]=$!
  unset "AGENT_RC[$i]"
  note "host$i: torchrun agent pid ${AGENT_PID[$i]} (ns $(ns_of "$i"), $(addr_of "$i"), tree $dir)"
}

# Loses host $1 whole: SIGKILL everything in its namespace, delete its tree.
kill_host() {
  local i=$1
  KILL_TIME=$EPOCHREALTIME
  if [[ $LOSS_MODE == cut ]]; then
    ip -n "$(ns_of "$i")" link set eth0 down ||
      fail "cannot cut host$i's link"
  fi
  kill_ns_pids "$(ns_of "$i")"
  rm -rf "$WORK/host$i"
  wait "${AGENT_PID[$i]}" 2>/dev/null
  unset "AGENT_PID[$i]" "AGENT_RC[$i]"
  ip netns del "$(ns_of "$i")"
  note "host$i lost: $([[ $LOSS_MODE == cut ]] && echo "link cut, ")every process in $(ns_of "$i") SIGKILLed, $WORK/host$i deleted"
}

# Reaps exited agents into AGENT_RC.
reap() {
  local h
  for h in "${!AGENT_PID[@]}"; do
    if [[ -z ${AGENT_RC[$h]:-} ]] && ! kill -0 "${AGENT_PID[$h]}" 2>/dev/null; then
      wait "${AGENT_PID[$h]}"
      AGENT_RC[$h]=$?
      note "host$h: torchrun agent exited with status ${AGENT_RC[$h]}"
    fi
  done
}
any_agent_done() { reap; [[ ${#AGENT_RC[@]} -gt 0 ]]; }
all_agents_done() { reap; [[ ${#AGENT_RC[@]} -eq ${#AGENT_PID[@]} ]]; }

# Stamped worker lines of host $1, kind $2 (out|err), rank $3 (a glob),
# sorted by time.
stamped() {
  cat "$WORK/host$1"/wlog/*-r$3-w*."$2" 2>/dev/null | sort -s -n -k1,1
}
# The first of them after stamp $4 matching the ERE $5.
first_after() {
  stamped "$1" "$2" "$3" | awk -v t="$4" '$1 > t' | grep -E -m1 -- "$5"
}
# The first rank-0 line after stamp $1 reporting a new commit made by a world
# of $2 ranks: a step above every step rank 0 reported committed before $1,
# and above the step recovery resumed from after $1.
commit_after() {
  { stamped 0 out 0 | sed 's/^/O /'; stamped 0 err 0 | sed 's/^/E /'; } |
    sort -s -n -k2,2 | awk -v t="$1" -v w="$2" '
      function num(s, key,   m) {
        if (!match(s, "\"" key "\":-?[0-9]+")) return -1
        m = substr(s, RSTART, RLENGTH); sub(/.*:/, "", m); return m + 0
      }
      BEGIN { floor = -1 }
      $2 <= t && $1 == "O" { c = num($0, "checkpoint_step"); if (c > floor) floor = c; next }
      $2 > t && $1 == "E" && match($0, /recovered step [0-9]+/) {
        r = substr($0, RSTART + 15, RLENGTH - 15) + 0; if (r > floor) floor = r; next
      }
      $2 > t && $1 == "O" && index($0, "\"world_size\":" w ",") &&
          index($0, "\"checkpoint_state\":\"committed") &&
          num($0, "checkpoint_step") > floor { print substr($0, 3); exit }'
}
has_commit_after() { [[ -n $(commit_after "$@") ]]; }
# Start stamp of the first rank-0 worker of a world of $2 ranks after $1.
world_start_after() {
  ls "$WORK/host0/wlog" 2>/dev/null | grep -- "-r0-w$2\.err\$" |
    awk -F- -v t="$1" '$1 > t { print $1; exit }'
}
stamp_of() { echo "${1%% *}"; }
text_of() { echo "${1#* }"; }
# Seconds from stamp $1 to stamp $2.
delta() {
  local d=$(($(usec "$2") - $(usec "$1")))
  printf '%d.%03d' $((d / 1000000)) $(((d % 1000000) / 1000))
}

tail_logs() {
  local i f
  for i in 0 1 2; do
    [[ -f $WORK/host$i/agent.log ]] || continue
    echo "---- host$i/agent.log (last 15 lines)" >&2
    tail -15 "$WORK/host$i/agent.log" >&2
    for f in $(ls "$WORK/host$i"/wlog/*.err 2>/dev/null | tail -"$NPROC"); do
      echo "---- ${f#"$WORK"/} (last 10 lines)" >&2
      tail -10 "$f" >&2
    done
  done
}

# Waits (polling every 0.5 s) until "$@" holds; fails after PHASE_TIMEOUT
# seconds, or once an agent has exited (unless ALLOW_EXIT=1).
wait_until() {
  local what=$1
  shift
  local end=$(($(usec) + PHASE_TIMEOUT * 1000000))
  while (($(usec) < end)); do
    "$@" && return 0
    if [[ ${ALLOW_EXIT:-0} -eq 0 ]] && any_agent_done; then
      tail_logs
      fail "a torchrun agent exited while waiting for: $what"
    fi
    sleep 0.5
  done
  tail_logs
  fail "timed out after ${PHASE_TIMEOUT}s waiting for: $what"
}

# --- run -------------------------------------------------------------------
note "launching 3 hosts x $NPROC ranks: $ITERATIONS iterations, save_every $SAVE_EVERY, $LOSSES host loss(es)"
LAUNCH_TIME=$EPOCHREALTIME
for i in 0 1 2; do launch_host "$i"; done

wait_until "a commit on 6 ranks (3 hosts)" has_commit_after "$LAUNCH_TIME" 6
START6=$(world_start_after "$LAUNCH_TIME" 6)
FIRST_ITER=$(first_after 0 out 0 "$LAUNCH_TIME" iteration)
COMMIT6=$(commit_after "$LAUNCH_TIME" 6)
COMMITTED=$("$HYCTL" inspect -o json "$WORK/host0/run" 2>/dev/null | grep -c '"committed": true')
note "rendezvous done (workers on 6 ranks) at $(since "$START6"), first iteration at $(since "$(stamp_of "$FIRST_ITER")"), first commit reported at $(since "$(stamp_of "$COMMIT6")"); host0's root holds $COMMITTED committed version(s)"
((COMMITTED >= 1)) || fail "rank 0 reported a commit, but hyctl inspect finds no committed version in $WORK/host0/run"

# How a survivor's worker first notices the loss: hy's heartbeat, or a
# collective failing (hyctl train exits Unavailable / DeadlineExceeded).
FAILURE_RE='peer failure detected|Unavailable|DeadlineExceeded'
declare -a SUMMARY=()
for ((loss = 1; loss <= LOSSES; loss++)); do
  if ((SOAK > 0)); then victim=$((2 - (loss % 2))); else victim=2; fi
  survivor=$((3 - victim))
  kill_host "$victim"
  kill_t=$KILL_TIME

  # The job re-forms on the 2 hosts left, recovers and commits there.
  wait_until "loss $loss: a commit on 4 ranks after losing host$victim" \
    has_commit_after "$kill_t" 4
  detect=""
  for h in 0 "$survivor"; do
    l=$(first_after "$h" err '*' "$kill_t" "$FAILURE_RE")
    if [[ -n $l ]] && { [[ -z $detect ]] ||
      (($(usec "$(stamp_of "$l")") < $(usec "$(stamp_of "$detect")"))); }; then
      detect=$l
    fi
  done
  start4=$(world_start_after "$kill_t" 4)
  recovered=$(first_after 0 err 0 "$kill_t" 'recovered step')
  first4=$(first_after 0 out 0 "$kill_t" iteration)
  commit4=$(commit_after "$kill_t" 4)
  echo "---- timeline, loss $loss of host$victim (seconds since the start; +since the kill)"
  echo "  kill                   $(since "$kill_t")"
  [[ -n $detect ]] && echo "  failure noticed        $(since "$(stamp_of "$detect")") +$(delta "$kill_t" "$(stamp_of "$detect")")  $(text_of "$detect" | cut -c1-150)"
  [[ -n $start4 ]] && echo "  workers on 4 ranks     $(since "$start4") +$(delta "$kill_t" "$start4")  (torchrun re-rendezvous done)"
  [[ -n $recovered ]] && echo "  recovered              $(since "$(stamp_of "$recovered")") +$(delta "$kill_t" "$(stamp_of "$recovered")")  $(text_of "$recovered")"
  [[ -n $first4 ]] && echo "  first iteration on 4   $(since "$(stamp_of "$first4")") +$(delta "$kill_t" "$(stamp_of "$first4")")  $(text_of "$first4" | grep -o '"iteration":[0-9]*')"
  echo "  commit on 4 ranks      $(since "$(stamp_of "$commit4")") +$(delta "$kill_t" "$(stamp_of "$commit4")")  $(text_of "$commit4" | grep -o '"checkpoint_state":"[^"]*"')"
  line="loss $loss (host$victim) at $(since "$kill_t"):"
  [[ -n $detect ]] && line+=" detect +$(delta "$kill_t" "$(stamp_of "$detect")"),"
  [[ -n $start4 ]] && line+=" 4 ranks +$(delta "$kill_t" "$start4"),"
  line+=" commit on 4 +$(delta "$kill_t" "$(stamp_of "$commit4")")"

  if ((SOAK > 0)); then
    # A fresh host in its place: new namespace, empty tree, same rendezvous.
    add_host_net "$victim" || fail "cannot recreate host$victim's namespace"
    join_t=$EPOCHREALTIME
    launch_host "$victim"
    wait_until "loss $loss: a commit on 6 ranks after host$victim rejoined" \
      has_commit_after "$join_t" 6
    start6=$(world_start_after "$join_t" 6)
    commit6=$(commit_after "$join_t" 6)
    echo "  fresh host$victim         $(since "$join_t")"
    [[ -n $start6 ]] && echo "  workers on 6 ranks     $(since "$start6") +$(delta "$join_t" "$start6") since the launch"
    echo "  commit on 6 ranks      $(since "$(stamp_of "$commit6")") +$(delta "$join_t" "$(stamp_of "$commit6")") since the launch  $(text_of "$commit6" | grep -o '"checkpoint_state":"[^"]*"')"
    # Each world rank 0 has started in since the fresh host was launched, and
    # how that worker ended (its last log line).
    for f in $(ls "$WORK/host0/wlog" | grep -- '-r0-w[0-9]*\.err$' |
      awk -F- -v t="$join_t" '$1 > t'); do
      echo "    rank 0 started $(since "${f%%-*}") in a world of $(echo "$f" | grep -o 'w[0-9]*' | tr -d w): $(grep -v 'recovery: old rank' "$WORK/host0/wlog/$f" | tail -1 | cut -d' ' -f2- | cut -c1-140)"
    done
    line+=", rejoin: 6 ranks +$(delta "$join_t" "${start6:-$join_t}"), commit on 6 +$(delta "$join_t" "$(stamp_of "$commit6")")"
  fi
  SUMMARY+=("$line")
done

# The job finishes: every agent left exits 0.
ALLOW_EXIT=1 wait_until "every torchrun agent to exit" all_agents_done
END_TIME=$EPOCHREALTIME
for h in "${!AGENT_PID[@]}"; do
  [[ ${AGENT_RC[$h]} == 0 ]] ||
    { tail_logs; fail "host$h's torchrun agent exited with status ${AGENT_RC[$h]}"; }
done

# The run finished all its iterations (rank 0's last line).
last=$(stamped 0 out 0 | grep '"iteration"' | tail -1)
echo "last iteration: $(text_of "$last" | grep -o '"iteration":[0-9]*\|"world_size":[0-9]*\|"checkpoint_state":"[^"]*"' | tr '\n' ' ')"
last_it=$(text_of "$last" | grep -o '"iteration":[0-9]*' | cut -d: -f2)
[[ ${last_it:-0} -ge $ITERATIONS ]] ||
  fail "the job stopped at iteration ${last_it:-?} of $ITERATIONS"
if ((SOAK == 0)); then
  text_of "$last" | grep -q '"world_size":4,' || fail "the job did not finish on 4 ranks"
fi
stamped 0 err 0 | grep 'recovered step' | grep -q 'on 4 ranks' ||
  fail "no \"recovered step ... on 4 ranks\" in rank 0's log"

# Every committed version in every root left verifies.
HOSTS_LEFT=$(printf '%s\n' "${!AGENT_PID[@]}" | sort)
for h in $HOSTS_LEFT; do
  echo "---- hyctl verify $WORK/host$h/run"
  "$HYCTL" verify "$WORK/host$h/run" || fail "hyctl verify $WORK/host$h/run failed"
done

# Where the final step's parts and replicas are: each root holds its own
# host's node only, so each shows its part of the placement (and on its
# own may not be "recoverable"). The step: rank 0's final checkpoint.
step=$(stamped 0 err 0 | grep -o 'done: .*checkpoint step [0-9]*' |
  tail -1 | grep -o '[0-9]*$')
[[ $step == "$ITERATIONS" ]] ||
  fail "rank 0's final checkpoint is step ${step:-none}, not $ITERATIONS"
for h in $HOSTS_LEFT; do
  root=$WORK/host$h/run
  echo "---- hyctl inspect $root${step:+ --step $step}"
  "$HYCTL" inspect "$root" ${step:+--step "$step"}
done

echo "---- summary (seconds since the start)"
echo "  6 ranks at $(since "$START6"), first iteration $(since "$(stamp_of "$FIRST_ITER")"), first commit $(since "$(stamp_of "$COMMIT6")")"
printf '  %s\n' "${SUMMARY[@]}"
echo "  every agent done at $(since "$END_TIME")"
OK=1
echo "PASS"
