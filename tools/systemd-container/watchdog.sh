#!/bin/sh
# Runs inside scripts/systemd-container (systemd is PID 1): the shipped units of a gateway
# (replaying /share/door.log in a loop) and of the brain, against the container's own
# mosquitto; each service's main process is hung with SIGSTOP, and we time how long
# systemd's watchdog takes to have it running again.
#
# Writes /share/results/<service>.txt: "hung <s> restarted <s> after <s> nrestarts <n>",
# the journal of the service, and "exit: <how the hung process ended>". Exit status 0
# when every service came back (the test judges the figures), 1 when one did not.
set -u
out=/share/results
mkdir -p "$out"
now() { date +%s.%N | cut -c1-14; }
show() { systemctl show -p "$1" --value "$2"; }

mkdir -p /etc/beaconbridge/credentials
cp /share/fleet.json /share/door.log /etc/beaconbridge/
chmod 644 /etc/beaconbridge/fleet.json /etc/beaconbridge/door.log
# An anonymous broker accepts any password; the units need their credential files.
for part in door brain; do echo "not-checked" > /etc/beaconbridge/credentials/$part.password; done
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > /etc/beaconbridge/credentials/brain.secret
chmod 600 /etc/beaconbridge/credentials/*
printf 'listener 1883 127.0.0.1\nallow_anonymous true\n' > /etc/mosquitto/conf.d/test.conf
systemctl daemon-reload
systemctl start mosquitto.service || { journalctl -u mosquitto --no-pager; exit 1; }

status=0
for service in beacon-gateway@door beacon-brain; do
  file=$out/$service.txt
  : > "$file"
  if ! systemctl start "$service"; then
    echo "did not start" >> "$file"
    journalctl -u "$service" --no-pager >> "$file"
    status=1; continue
  fi
  # Running for a while first: the watchdog keep-alives are flowing.
  sleep 5
  pid=$(show MainPID "$service")
  before=$(show NRestarts "$service")
  hung=$(now)
  kill -STOP "$pid"
  back=""
  for _ in $(seq 1 600); do
    sleep 0.1
    current=$(show MainPID "$service")
    if [ "$current" != "$pid" ] && [ "$current" != 0 ] && [ "$(show ActiveState "$service")" = active ]; then
      back=$(now); break
    fi
  done
  if [ -z "$back" ]; then
    echo "not restarted within 60 s" >> "$file"; status=1
  else
    echo "hung $hung restarted $back after $(awk "BEGIN{printf \"%.1f\", $back - $hung}") nrestarts $before $(show NRestarts "$service")" >> "$file"
  fi
  echo "--- journal" >> "$file"
  journalctl -u "$service" --no-pager -o short-precise >> "$file" 2>&1
  # How the hung process ended, in systemd's words ("status=6/ABRT" is the abort).
  echo "exit: $(journalctl -u "$service" --no-pager -o cat | grep -m1 'Main process exited')" >> "$file"
  systemctl stop "$service"
done
exit $status
