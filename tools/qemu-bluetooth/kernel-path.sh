#!/bin/sh
# The kernel path, end to end, inside the QEMU rig (scripts/qemu-bluetooth): libbluetooth
# on a real kernel's HCI sockets, two emulated controllers from `btvirt -l2`, the broker
# on the host as 10.0.2.2. Tests/IntegrationTests/KernelPathTests.swift runs it and checks
# what reached the broker; by hand:
#
#   scripts/qemu-bluetooth --env BROKER_PORT=1883 --script tools/qemu-bluetooth/kernel-path.sh
#
# (with a mosquitto listening on the host's 127.0.0.1:1883). Each phase advertises a
# different minor from hci1, so what reaches the broker tells which phases worked:
#   minor 1  a gateway (unprivileged, only CAP_NET_RAW/CAP_NET_ADMIN as ambient
#            capabilities, as `setcap` gives them) on hci0 after a scanner was
#            killed mid-scan on hci0
#   minor 2  the same gateway after `hciconfig hci0 down` (it reports retrying, recovers);
#            then `hciconfig hci1 down` ends the advertiser with status 1 and the reason
#   minor 3  after btvirt is killed (both adapters unregistered) and started again
#   minor 4  an advertiser without retrigger: only the scan-stall watchdog's scan
#            restarts make btvirt report it again
#   minor 900  a second gateway on hci1 advertising as an iBeacon from its config
#   minor 8  as the systemd unit runs it: CAP_NET_RAW alone; with hci0 down it exits 1
#            saying so, `beacon-gateway --adapter-up` as root brings hci0 up, then it scans
# Results (logs, range output) go to /share/results. Exit status 0 when every guest-side
# check passed.
set -u
UUID=E2C56DB5-DFFB-48D2-B060-D0F5A71096E0
PORT=${BROKER_PORT:?set BROKER_PORT to the host broker port}
R=/share/results
W=/tmp/kernel-path
mkdir -p "$R" "$W"
chmod 755 "$W"
failures=0

say() { echo "kernel-path: $*"; }
fail() { say "FAILED: $*"; failures=$((failures + 1)); }
# wait_for FILE PATTERN SECONDS: until grep finds PATTERN in FILE.
wait_for() {
    i=0
    while [ "$i" -lt $(($3 * 5)) ]; do
        grep -q -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.2; i=$((i + 1))
    done
    return 1
}
count() { grep -c -- "$2" "$1" 2>/dev/null || true; }
# busybox sh runs its own applets before PATH: util-linux's setpriv by its path.
SETPRIV=/share/.rig/bin/setpriv
as_service() {
    # What AmbientCapabilities=CAP_NET_RAW CAP_NET_ADMIN with User= gives a service.
    # exec: `as_service … &` must leave the program's PID in $!, not a subshell's.
    exec $SETPRIV --reuid=1000 --regid=1000 --clear-groups --inh-caps=-all,+net_raw,+net_admin \
        --ambient-caps=-all,+net_raw,+net_admin --bounding-set=-all,+net_raw,+net_admin "$@"
}
advertise() {  # advertise MINOR [extra options]
    minor=$1; shift
    beaconctl advertise --source hci:1 --uuid "$UUID" --major 4660 --minor "$minor" "$@" \
        > "$R/advertise-$minor.out" 2>&1 &
    ADV=$!
    wait_for "$R/advertise-$minor.out" "^advertising" 10 || fail "advertising minor $minor did not start: $(cat "$R/advertise-$minor.out")"
}
stop_advertising() {
    kill -INT "$ADV" 2>/dev/null
    wait "$ADV"; status=$?
    [ "$status" = 0 ] || say "advertiser exited with $status"
}

cat > "$W/fleet.json" <<EOF
{
  "broker": { "url": "mqtt://10.0.2.2:$PORT", "keepalive": 5, "allowPlaintext": true },
  "defaults": { "exitTimeout": 30, "scan": { "stallTimeout": 3 } },
  "gateways": [
    { "id": "pi", "source": "hci:0", "zone": "Kernel lab" },
    { "id": "pi-beacon", "source": "hci:1",
      "advertise": { "uuid": "$UUID", "major": 4660, "minor": 900, "power": -59 } }
  ]
}
EOF
chmod 644 "$W/fleet.json"

say "phase 0: a scanner killed mid-scan leaves hci0 scanning"
hcitool -i hci0 lescan --duplicates > "$R/lescan-killed.out" 2>&1 &
sleep 2
kill -9 $! 2>/dev/null
sleep 0.5
timeout 5 hcitool -i hci0 lescan > "$R/lescan-after-kill.out" 2>&1
say "a second lescan on hci0 now says: $(head -1 "$R/lescan-after-kill.out")"

say "phase 1: the gateway, unprivileged with ambient capabilities, on hci0"
as_service beacon-gateway --config "$W/fleet.json" --id pi --log-level debug > "$R/gateway.log" 2>&1 &
GW=$!
wait_for "$R/gateway.log" "source running" 20 || fail "the gateway did not start scanning"
advertise 1 --retrigger 1
wait_for "$R/gateway.log" "4660/1 \[Gateway\] enter" 15 || fail "the gateway did not hear minor 1"
sleep 2
stop_advertising

say "phase 2: hciconfig hci0 down, and the gateway brings it back"
hciconfig hci0 down
wait_for "$R/gateway.log" "the adapter went down" 10 || fail "the gateway did not notice hci0 going down"
wait_for "$R/gateway.log" "retrying" 5 || fail "the gateway did not report retrying"
running_before=$(count "$R/gateway.log" "source running")
# Up to 60 s: the gateway retries with a doubling delay (0.5, 1, 2, 4, 8, 16 s, LiveScanner),
# so on a guest slowed by a loaded host (TCG), a few failed attempts put the next one 20 s
# or more after `retrying`; 20 s was once too short with both host cores busy.
i=0
while [ "$(count "$R/gateway.log" "source running")" -le "$running_before" ] && [ $i -lt 300 ]; do sleep 0.2; i=$((i + 1)); done
[ "$(count "$R/gateway.log" "source running")" -gt "$running_before" ] || fail "scanning did not resume after hci0 went down"
hciconfig hci0 | grep -q "UP RUNNING" || fail "hci0 is not up again"
advertise 2 --retrigger 1
wait_for "$R/gateway.log" "4660/2 \[Gateway\] enter" 15 || fail "the gateway did not hear minor 2 after hci0 came back"
# The advertiser's adapter going down ends `beaconctl advertise` with status 1 and says why.
hciconfig hci1 down
wait "$ADV"; echo "$?" > "$R/advertise-down.status"
grep -q "the adapter went down" "$R/advertise-2.out" || fail "beaconctl advertise did not notice hci1 going down: $(cat "$R/advertise-2.out")"
[ "$(cat "$R/advertise-down.status")" = 1 ] || fail "beaconctl advertise exited with $(cat "$R/advertise-down.status") after hci1 went down"
hciconfig hci1 up

say "phase 3: btvirt killed (both adapters unregistered) and started again"
kill "$(cat /run/btvirt.pid)"
sleep 1
[ -e /sys/class/bluetooth/hci0 ] && fail "hci0 still registered after btvirt ended"
wait_for "$R/gateway.log" "retrying" 10 || fail "no retrying after the adapter went away"
# Counted before the adapters come back: the gateway may reopen hci0 before hci1 is up.
running_before=$(count "$R/gateway.log" "source running")
btvirt -l2 > /tmp/btvirt2.log 2>&1 &
echo $! > /run/btvirt.pid
i=0
while [ ! -e /sys/class/bluetooth/hci1 ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
hciconfig hci1 up
i=0
while [ "$(count "$R/gateway.log" "source running")" -le "$running_before" ] && [ $i -lt 200 ]; do sleep 0.2; i=$((i + 1)); done
[ "$(count "$R/gateway.log" "source running")" -gt "$running_before" ] || fail "scanning did not resume after the adapters came back"
advertise 3 --retrigger 1
wait_for "$R/gateway.log" "4660/3 \[Gateway\] enter" 20 || fail "the gateway did not hear minor 3 after the adapters came back"
stop_advertising

say "phase 4: no retrigger: the scan-stall watchdog restarts the scan"
advertise 4
sleep 10
stop_advertising
grep -q "restarting the scan" "$R/gateway.log" || fail "the stall watchdog never restarted the scan"

say "phase 5: beaconctl range on hci0, stopped with SIGINT"
kill -INT "$GW"; wait "$GW"; echo "$?" > "$R/gateway.status"
advertise 5 --retrigger 1
beaconctl range --source hci:0 --uuid "$UUID" > "$R/range.out" 2> "$R/range.err" &
RANGE=$!
sleep 5
kill -INT "$RANGE"; wait "$RANGE"; echo "$?" > "$R/range.status"
stop_advertising
# Scanning is off again: a new lescan can set its parameters.
timeout 3 hcitool -i hci0 lescan > "$R/lescan-after-range.out" 2>&1
grep -q "Set scan parameters failed" "$R/lescan-after-range.out" && fail "range left hci0 scanning"

say "phase 6: without capabilities, a clear message naming them"
$SETPRIV --reuid=1000 --regid=1000 --clear-groups --inh-caps=-all --bounding-set=-all \
    beacon-gateway --config "$W/fleet.json" --id pi > "$R/nocaps.out" 2>&1
echo "$?" > "$R/nocaps.status"
grep -q "lacks CAP_NET_RAW and CAP_NET_ADMIN" "$R/nocaps.out" || fail "no capability message: $(cat "$R/nocaps.out")"

say "phase 7: a gateway that is also a beacon (hci1), heard by the gateway on hci0"
as_service beacon-gateway --config "$W/fleet.json" --id pi-beacon --log-level debug > "$R/gateway-beacon.log" 2>&1 &
GWB=$!
as_service beacon-gateway --config "$W/fleet.json" --id pi --log-level debug > "$R/gateway2.log" 2>&1 &
GW=$!
wait_for "$R/gateway2.log" "4660/900 \[Gateway\] enter" 20 || fail "the gateway on hci0 did not hear the gateway-beacon on hci1"
kill -TERM "$GW" "$GWB"; wait "$GW"; wait "$GWB"

say "phase 8: as the systemd unit runs it: CAP_NET_RAW only, the adapter brought up as root (--adapter-up)"
as_unit() {
    # What the shipped unit gives the gateway: AmbientCapabilities=CAP_NET_RAW with User=.
    exec $SETPRIV --reuid=1000 --regid=1000 --clear-groups --inh-caps=-all,+net_raw \
        --ambient-caps=-all,+net_raw --bounding-set=-all,+net_raw "$@"
}
hciconfig hci0 down
(as_unit beacon-gateway --config "$W/fleet.json" --id pi > "$R/rawonly-down.out" 2>&1)
echo "$?" > "$R/rawonly-down.status"
grep -q "the adapter is down and bringing it up needs CAP_NET_ADMIN" "$R/rawonly-down.out" \
    || fail "no message for a down adapter without CAP_NET_ADMIN: $(cat "$R/rawonly-down.out")"
[ "$(cat "$R/rawonly-down.status")" = 1 ] || fail "a gateway that cannot bring hci0 up exited with $(cat "$R/rawonly-down.status")"
beacon-gateway --config "$W/fleet.json" --id pi --adapter-up > "$R/adapter-up.out" 2>&1 \
    || fail "--adapter-up failed: $(cat "$R/adapter-up.out")"
grep -q "hci0 is up" "$R/adapter-up.out" || fail "--adapter-up said: $(cat "$R/adapter-up.out")"
hciconfig hci0 | grep -q "UP RUNNING" || fail "--adapter-up did not bring hci0 up"
as_unit beacon-gateway --config "$W/fleet.json" --id pi --log-level debug > "$R/gateway-rawonly.log" 2>&1 &
GW=$!
advertise 8 --retrigger 1
wait_for "$R/gateway-rawonly.log" "4660/8 \[Gateway\] enter" 20 || fail "the gateway with CAP_NET_RAW alone did not hear minor 8"
stop_advertising
kill -TERM "$GW"; wait "$GW"

dmesg > "$R/dmesg.txt"
cp /tmp/btvirt*.log "$R/" 2>/dev/null
say "done with $failures failure(s)"
[ "$failures" = 0 ]
