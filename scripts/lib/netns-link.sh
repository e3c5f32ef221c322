# Two "hosts" for the link benches (bench-reshard-link.sh,
# bench-vllm-link.sh): network namespaces $NS0 and $NS1 ($A0 and $A1)
# joined by a veth pair, deleted on exit. Source it after defining skip()
# (says why and exits 77) and PY (a python3); then:
#   shape RATE_GBIT   both ends' egress through a token bucket at that rate
#   measure           a 4 s bulk TCP transfer NS0 -> NS1; prints its Gb/s
#   at_rate RATE NAME shape, then measure, and say so (a JSON object of
#                     bench NAME when JSON=1, a line otherwise); sets got
SUF=$$
NS0=hy-lk0-$SUF NS1=hy-lk1-$SUF
A0=10.77.$((SUF % 250)).1 A1=10.77.$((SUF % 250)).2
cleanup() { ip netns del "$NS0" 2>/dev/null; ip netns del "$NS1" 2>/dev/null; }
trap cleanup EXIT
ip netns add "$NS0" 2>/dev/null || skip "cannot create a network namespace (no CAP_NET_ADMIN?)"
ip netns add "$NS1" || exit 1
ip -n "$NS0" link add eth0 type veth peer name eth0 netns "$NS1" || skip "no veth"
for ns in "$NS0" "$NS1"; do ip -n "$ns" link set lo up; done
ip -n "$NS0" addr add "$A0/24" dev eth0 && ip -n "$NS0" link set eth0 up
ip -n "$NS1" addr add "$A1/24" dev eth0 && ip -n "$NS1" link set eth0 up

# shape RATE_GBIT: both ends' egress through a token bucket at that rate.
# The bucket holds 8 ms of the rate (veth hands over 64 KB GSO packets;
# a burst below a packet would drop it).
shape() {
  local burst=$(($1 * 1000000 / 8 * 8 / 1000))  # bytes in 8 ms
  for ns in "$NS0" "$NS1"; do
    tc -n "$ns" qdisc replace dev eth0 root tbf rate "${1}gbit" \
      burst "$burst" latency 20ms || return 1
  done
}

# measure: a plain bulk TCP transfer NS0 -> NS1 of 4 s; prints Gb/s.
measure() {
  ip netns exec "$NS1" "$PY" - "$A1" <<'PY' &
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5201)); s.listen(1)
c, _ = s.accept(); n = 0; t0 = None
buf = bytearray(1 << 20)
while True:
    k = c.recv_into(buf)
    if not k: break
    if t0 is None: t0 = time.perf_counter()
    n += k
print(f"{n * 8 / (time.perf_counter() - t0) / 1e9:.3f}")
PY
  local rx=$!
  sleep 0.5
  ip netns exec "$NS0" "$PY" - "$A1" <<'PY' >/dev/null
import socket, sys, time
c = socket.create_connection((sys.argv[1], 5201))
buf = b"\0" * (4 << 20); end = time.perf_counter() + 4
while time.perf_counter() < end: c.sendall(buf)
c.close()
PY
  wait $rx
}

# at_rate RATE_GBIT NAME: shapes the link, measures it into $got and says so.
at_rate() {
  shape "$1" || { echo "tc: cannot shape eth0 to ${1}gbit" >&2; exit 1; }
  got=$(measure)
  if [ "${JSON:-0}" = 1 ]; then
    echo "{\"bench\":\"$2\",\"link\":true,\"link_gbps\":$1,\"measured_gbps\":$got}"
  else
    echo "== link shaped to $1 Gb/s: a bulk TCP transfer measures $got Gb/s"
  fi
}
