#!/usr/bin/env bash
# Three processes of the replicated key-value service (crates/redolog-kv,
# openraft 0.10 on redolog-raft) on loopback: form the cluster (init, add two
# learners, make them voters), write through the leader past three
# snapshots, read from every node, SIGKILL the leader, see another elected
# and take writes, restart the old leader from its directory (its own
# snapshot, then the leader's: the log behind a snapshot is purged at once),
# and check that every node converges to the same map. Exits non-zero on any mismatch or when a
# step does not happen within its bound; kills its processes and removes its
# directory on every path. Needs curl and jq (.ci/run installs them).
#
#   scripts/test-cluster.sh            # builds the node program (debug) first
#   NODE=target/release/redolog-kv scripts/test-cluster.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z "${NODE:-}" ]]; then
    cargo build -q -p redolog-kv
    NODE=target/debug/redolog-kv
fi
WAIT=30  # seconds any one step may take
KEYS=300 # written before the kill: past two snapshots (every 100 entries)

work=$(mktemp -d)
declare -A pid addr
cleanup() {
    for id in "${!pid[@]}"; do kill -9 "${pid[$id]}" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
    echo "test-cluster: FAILED: $*" >&2
    for id in "${!addr[@]}"; do
        echo "--- node $id (${addr[$id]}), last lines of its output:" >&2
        tail -5 "$work/node-$id.out" >&2 || true
    done
    exit 1
}

# Starts node $1 on $2 (host:port; port 0 the first time) and waits until it serves.
start() {
    local id=$1 listen=$2
    "$NODE" --id "$id" --listen "$listen" --dir "$work/node-$id" --snapshot-every 100 --keep-logs 0 \
        >>"$work/node-$id.out" 2>&1 &
    pid[$id]=$!
    local deadline=$((SECONDS + WAIT)) line
    until line=$(grep -o "listening on .*" "$work/node-$id.out" | tail -1) && [[ -n $line ]] &&
        [[ $listen == *:0 || ${line#listening on } == "$listen" ]]; do
        kill -0 "${pid[$id]}" 2>/dev/null || fail "node $id exited at start"
        ((SECONDS < deadline)) || fail "node $id did not start within ${WAIT}s"
        sleep 0.1
    done
    addr[$id]=${line#listening on }
}

# POSTs JSON $2 to node $1's path $3; prints the body, fails on an HTTP error.
post() {
    curl -sS --max-time 10 -H 'content-type: application/json' -d "$2" "http://${addr[$1]}$3" ||
        fail "POST $3 to node $1"
}

get() {
    curl -sS --max-time 10 "http://${addr[$1]}$2"
}

# Waits until node $1 names a leader other than $2 (or any, with $2 empty);
# prints it.
leader_of() {
    local id=$1 not=${2:-} deadline=$((SECONDS + WAIT)) leader
    while true; do
        leader=$(get "$id" /cluster/metrics | jq -r '.current_leader // empty' 2>/dev/null || true)
        if [[ -n $leader && $leader != "$not" ]]; then
            echo "$leader"
            return
        fi
        ((SECONDS < deadline)) || fail "node $id saw no leader${not:+ other than $not} within ${WAIT}s"
        sleep 0.2
    done
}

# Writes key$2..key$3 = value-N through leader $1, following "not leader"
# answers to the leader they name.
write_keys() {
    local leader=$1 from=$2 to=$3 n body deadline
    for ((n = from; n <= to; n++)); do
        deadline=$((SECONDS + WAIT))
        while true; do
            body=$(curl -sS --max-time 10 -w '\n%{http_code}' -H 'content-type: application/json' \
                -d "{\"op\": \"set\", \"key\": \"key$n\", \"value\": \"value-$n\"}" \
                "http://${addr[$leader]}/api/write" || true)
            [[ ${body##*$'\n'} == 200 ]] && break
            ((SECONDS < deadline)) || fail "write key$n: ${body%$'\n'*}"
            local hint
            hint=$(jq -r '.leader.id // empty' <<<"${body%$'\n'*}" 2>/dev/null || true)
            [[ -n $hint && -n ${addr[$hint]:-} ]] && leader=$hint
            sleep 0.2
        done
    done
}

# Waits until every running node's map is the same and holds $1 keys.
converged() {
    local want=$1 deadline=$((SECONDS + WAIT)) id first dump
    while true; do
        first="" && local same=1
        for id in "${!pid[@]}"; do
            dump=$(get "$id" /api/dump 2>/dev/null || echo "unreachable")
            [[ -z $first ]] && first=$dump
            [[ $dump == "$first" ]] || same=0
        done
        if ((same)) && [[ $(jq length <<<"$first" 2>/dev/null || echo -1) == "$want" ]]; then
            return
        fi
        ((SECONDS < deadline)) || fail "the nodes did not converge on $want keys within ${WAIT}s"
        sleep 0.2
    done
}

echo "== three nodes"
for id in 1 2 3; do start "$id" 127.0.0.1:0; done
echo "   ${addr[1]} ${addr[2]} ${addr[3]}"

echo "== form the cluster: init node 1, add nodes 2 and 3 as learners, make them voters"
post 1 "{\"members\": {\"1\": \"${addr[1]}\"}}" /cluster/init >/dev/null
leader=$(leader_of 1)
[[ $leader == 1 ]] || fail "node 1 alone elected node $leader"
post 1 "{\"id\": 2, \"addr\": \"${addr[2]}\"}" /cluster/add-learner >/dev/null
post 1 "{\"id\": 3, \"addr\": \"${addr[3]}\"}" /cluster/add-learner >/dev/null
post 1 '[1, 2, 3]' /cluster/change-membership >/dev/null
voters=$(get 1 /cluster/metrics | jq -c '.voters')
[[ $voters == "[1,2,3]" ]] || fail "voters are $voters"

echo "== $KEYS writes through the leader (node $leader)"
write_keys "$leader" 1 "$KEYS"
converged "$KEYS"
value=$(get "$leader" "/api/read?key=key7" | jq -r .value)
[[ $value == value-7 ]] || fail "linearizable read of key7 on the leader: $value"
for id in 1 2 3; do
    value=$(get "$id" "/api/local?key=key$KEYS" | jq -r .value)
    [[ $value == "value-$KEYS" ]] || fail "node $id holds key$KEYS = $value"
done
unknown=$(get "$leader" "/api/read?key=never-written")
[[ $(jq -r .error <<<"$unknown") == "unknown key" ]] || fail "an unknown key answered $unknown"
follower=$(( leader % 3 + 1 ))
redirect=$(get "$follower" "/api/read?key=key7")
[[ $(jq -r '.leader.id' <<<"$redirect") == "$leader" ]] || fail "a read on follower $follower answered $redirect"

echo "== SIGKILL the leader (node $leader)"
old=$leader
old_addr=${addr[$old]}
old_last=$(get "$old" /cluster/metrics | jq -r '.last_log_index')
kill -9 "${pid[$old]}"
wait "${pid[$old]}" 2>/dev/null || true
unset "pid[$old]"
survivor=$(( old % 3 + 1 ))
leader=$(leader_of "$survivor" "$old")
echo "   node $leader leads now"
write_keys "$leader" $((KEYS + 1)) $((KEYS + 100))
converged $((KEYS + 100))
# The log behind the leader's newest snapshot is purged: once that passes
# where the old leader's log ended, it can only catch up by the snapshot.
deadline=$((SECONDS + WAIT))
until (( $(get "$leader" /cluster/metrics | jq -r '.purged // 0') > old_last )); do
    ((SECONDS < deadline)) || fail "the leader's log was not purged past index $old_last"
    sleep 0.2
done

echo "== restart node $old from its directory"
start "$old" "$old_addr"
converged $((KEYS + 100))
value=$(get "$old" "/api/local?key=key$((KEYS + 100))" | jq -r .value)
[[ $value == "value-$((KEYS + 100))" ]] || fail "the restarted node holds key$((KEYS + 100)) = $value"
snapshot=$(get "$old" /cluster/metrics | jq -r '.snapshot // 0')
((snapshot > old_last)) || fail "node $old caught up without a snapshot past its log's end ($snapshot <= $old_last)"

echo "test-cluster: OK — 3 nodes, $((KEYS + 100)) keys on every node, leader $old killed at log index $old_last, node $leader elected, node $old caught up by a snapshot to $snapshot"
