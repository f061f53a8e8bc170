"""Tells scripts/demo's story from what the broker carries (`mosquitto_sub -v` lines on stdin):
one customer's visit, through the gateway layer (her beacon's sightings and each gateway's
presence) and the brain (fleet presence, her inbox, the barista's display, the greeter's
roster), then a summary when the brain says she has left.

Every line it prints comes from a message's content and the order in which the messages
arrive, never from a clock (times are the capture's, from the gateways' payloads). The demo
makes that order the same on every run (see scripts/demo).

    demo-story.py --client ana --customer Ana --beacon 100/1 --beacon-name customer-1 --signals DIR

It creates DIR/ready when it sees a message on demo/ready (it is subscribed), DIR/joined
at the first inbox message, and DIR/left after the summary, then exits.
"""
import argparse
import json
import os
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", required=True)
    parser.add_argument("--customer", required=True)
    parser.add_argument("--beacon", required=True)
    parser.add_argument("--beacon-name", required=True)
    parser.add_argument("--signals", required=True)
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    Story(args).run(sys.stdin)


class Story:
    def __init__(self, args):
        self.args = args
        self.who = args.customer
        self.beacon = "beacons/" + args.beacon
        self.sightings = {}            # gateway -> [count, first sighting payload, last ts]
        self.presence = {}             # gateway -> proximity while present
        self.since = {}                # gateway -> when its presence began (capture time)
        self.zone = None               # (zone, proximity) from the brain
        self.zones = []
        self.inbox = []
        self.roster = None

    def signal(self, name):
        open(os.path.join(self.args.signals, name), "w").close()

    def say(self, who, text):
        print(f"   {who:<17} {text}", flush=True)

    def run(self, lines):
        for line in lines:
            topic, _, payload = line.rstrip("\n").partition(" ")
            if payload == "(null)":
                payload = ""
            if topic == "demo/ready":
                if not os.path.exists(os.path.join(self.args.signals, "ready")):
                    self.signal("ready")
                continue
            try:
                done = self.message(topic, payload)
            except (ValueError, KeyError, TypeError) as error:
                self.say("?", f"{topic}: could not read {payload[:80]!r} ({error})")
                done = False
            if done:
                self.summary()
                self.signal("left")
                return

    def message(self, topic, payload):
        if topic == self.beacon:
            sighting = json.loads(payload)
            seen = self.sightings.setdefault(sighting["gateway"], [0, payload, ""])
            seen[0] += 1
            seen[2] = sighting["ts"]
        elif topic.startswith(self.beacon + "/presence/"):
            gateway = topic.rsplit("/", 1)[1]
            if not payload:
                self.presence.pop(gateway, None)
                self.say(f"gateway {gateway}", f"{topic}: deleted, nothing heard for exitTimeout (out of range)")
                return False
            view = json.loads(payload)
            proximity, distance = view["proximity"], view.get("distance")
            before = self.presence.get(gateway)
            self.presence[gateway] = proximity
            where = proximity + (f", {distance:.1f} m" if isinstance(distance, (int, float)) else "")
            if before is None:
                self.since[gateway] = view["since"]
                self.say(f"gateway {gateway}", f"{topic} (retained): in range since {view['since'][11:23]}, {where}")
            elif before != proximity:
                self.say(f"gateway {gateway}", f"{topic}: {where}")
        elif topic == self.beacon + "/presence":
            if not payload:
                self.say("brain", f"{topic}: deleted: {self.who} has left the store")
                return True
            fleet = json.loads(payload)
            now = (fleet["zone"], fleet["proximity"])
            if now != self.zone:
                if not self.zones or self.zones[-1] != fleet["zone"]:
                    self.zones.append(fleet["zone"])
                verb = "is in" if self.zone is None or self.zone[0] != now[0] else "is still in"
                self.say("brain", f"{topic} (retained): {self.who} {verb} zone {now[0]} ({now[1]}; seen by "
                                  f"{', '.join(view['gateway'] for view in fleet['gateways'])})")
                self.zone = now
        elif topic == f"observers/{self.args.client}/inbox":
            message = json.loads(payload)
            kind, rule = message.get("type"), message.get("rule")
            if kind == "ad":
                ad = message.get("ad") or {}
                text = f'ad "{ad.get("title", "")}: {ad.get("text", "")}"'
            elif kind == "greeting":
                text = f'greeting "{message.get("text")}"'
            else:
                text = f"{kind} {json.dumps({k: v for k, v in message.items() if k not in ('type', 'ts')})}"
            if rule is None:
                why = "on joining"
            else:
                why = f'from rule "{rule}"' + (f", while her zone was {self.zone[0]}" if self.zone else "")
            self.inbox.append(f"{text} {why}")
            self.say(f"{self.who}'s inbox", f"{text} ({why})")
            if len(self.inbox) == 1:
                self.signal("joined")
        elif topic.startswith("displays/"):
            if self.args.beacon_name in payload.split():
                self.say("brain", f"{topic}: {payload}")
        elif topic.startswith("stores/") and topic.endswith("/roster"):
            roster = json.loads(payload) if payload else {"customers": []}
            names = [c.get("name") or c.get("client") for c in roster.get("customers", [])]
            if names != self.roster:
                self.roster = names
                self.say("brain", f"{topic} (retained; the greeter's view): {', '.join(names) if names else 'nobody'}")
        return False

    def summary(self):
        a = self.args
        print(f"== summary{(' (' + a.title + ')') if a.title else ''}: {self.who}'s visit with beacon {a.beacon}")
        for gateway, (count, first, last) in sorted(self.sightings.items()):
            print(f"   gateway {gateway:<8} {count} sightings on {self.beacon} (one a second while in range), in range "
                  f"from {self.since.get(gateway, '?')[11:23]}, last heard {last[11:23]}")
        print(f"   brain            zone {' → '.join(self.zones) or 'none'}")
        print(f"   {self.who + chr(39) + 's inbox':<17}", end="")
        print(("\n" + " " * 20).join(self.inbox))
        if self.sightings:
            gateway, (_, first, _) = sorted(self.sightings.items())[0]
            print(f"   a sighting as gateway {gateway} published it on {self.beacon}:")
            print(f"     {first}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
