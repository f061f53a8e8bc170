"""Times other projects' BLE decoders on the advertisements in a hex file and prints them
beside BeaconBridge's figures measured on the same file in the same run (scripts/bench-peers).

Rates are per second of this thread's CPU time, the median of several runs, as
Benchmarks/ measures BeaconBridge. Each peer gets its input in the form it is normally
called with, prepared before timing starts.
"""
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from importlib.metadata import version

from beacontools import parse_packet
from bluetooth_data_tools import parse_advertisement_data_tuple
from TheengsDecoder import decodeBLE


def event_reports(event):
    """(address, advertising data, rssi) of every legacy report in an HCI LE Advertising Report event."""
    assert event[0] == 0x3E and event[2] == 0x02, "not an LE Advertising Report"
    out = []
    offset = 4
    for _ in range(event[3]):
        address = ":".join(f"{b:02X}" for b in reversed(event[offset + 2:offset + 8]))
        length = event[offset + 8]
        data = event[offset + 9:offset + 9 + length]
        rssi = int.from_bytes(event[offset + 9 + length:offset + 10 + length], "little", signed=True)
        out.append((address, data, rssi))
        offset += 10 + length
    return out


def reports(path):
    """(address, advertising data, rssi) of every legacy report in the HCI events of a hex file."""
    out = []
    with open(path) as lines:
        for line in lines:
            out += event_reports(bytes.fromhex(line.strip()))
    return out


def manufacturer_data(data):
    """The manufacturer-specific AD structure's content (company id first), as Theengs wants it."""
    i = 0
    while i < len(data) and data[i]:
        length = data[i]
        if data[i + 1] == 0xFF:
            return data[i + 2:i + 1 + length]
        i += 1 + length
    return b""


def timed(name, inputs, call, runs, check):
    rates = []
    for _ in range(runs):
        start = time.thread_time()
        for item in inputs:
            call(item)
        rates.append(len(inputs) / (time.thread_time() - start))
    assert check(call(inputs[0])), f"{name} did not decode the first advertisement"
    return statistics.median(rates)


def decode_lines(peer):
    """A peer as a whole process, like `beaconctl decode`: hex lines (HCI events with the H4
    type byte) on stdin, one JSON line per report on stdout."""
    write = sys.stdout.write
    if peer == "theengs":
        from TheengsDecoder import decodeBLE
        for line in sys.stdin:
            for address, data, rssi in event_reports(bytes.fromhex(line.strip())[1:]):
                decoded = decodeBLE(json.dumps({"id": address, "manufacturerdata": manufacturer_data(data).hex(),
                                                "rssi": rssi}))
                write((decoded or '{"error":"no beacon"}') + "\n")
    else:
        for line in sys.stdin:
            for address, data, rssi in event_reports(bytes.fromhex(line.strip())[1:]):
                packet = parse_packet(data)
                write(json.dumps({"uuid": packet.uuid, "major": packet.major, "minor": packet.minor,
                                  "txPower": packet.tx_power, "address": address, "rssi": rssi}
                                 if packet is not None else {"error": "no beacon"}) + "\n")


def whole_process(command, path, runs, expected_lines):
    """Median lines/s of `command < path > /dev/null`, by wall clock and by the child's CPU
    time (user + system), over `runs` runs after one warm-up."""
    walls, cpus = [], []
    for run in range(runs + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        with open(path, "rb") as stdin:
            result = subprocess.run(command, stdin=stdin, stdout=subprocess.PIPE, check=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        lines = result.stdout.count(b"\n")
        assert lines == expected_lines, f"{command[0]} printed {lines} lines for {expected_lines}"
        if run > 0:
            walls.append(expected_lines / wall)
            cpus.append(expected_lines / ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)))
    return statistics.median(walls), statistics.median(cpus), result.stdout.split(b"\n", 1)[0].decode()


def processes(lines_path, beaconctl, runs):
    """BeaconBridge's `beaconctl decode` and the peers, each a whole process reading hex lines and
    writing JSON lines (slices of the file for the slow peers, so a run takes seconds)."""
    with open(lines_path) as f:
        all_lines = f.readlines()
    directory = os.path.dirname(lines_path)
    slices = {}
    for name, size in (("theengs", 3000), ("beacontools", 30000)):
        slices[name] = os.path.join(directory, f"{name}.hex")
        with open(slices[name], "w") as f:
            f.writelines(all_lines[:size])
    ours_wall, ours_cpu, first = whole_process([beaconctl, "decode"], lines_path, runs, len(all_lines))
    assert json.loads(first)["format"] == "ibeacon", first
    me = [sys.executable, os.path.abspath(__file__), "decode-lines"]
    theengs_wall, theengs_cpu, _ = whole_process(me + ["theengs"], slices["theengs"], max(1, runs // 2), 3000)
    tools_wall, tools_cpu, _ = whole_process(me + ["beacontools"], slices["beacontools"], max(1, runs // 2), 30000)
    print(f"\nAs whole processes: hex lines (H4 HCI events) on stdin, one JSON line per report on stdout; "
          f"lines/s by wall clock and by CPU time (user + system), median of {runs} runs:")
    rows = [
        (f"beaconctl decode, {len(all_lines):,} lines", ours_wall, ours_cpu, ""),
        (f"TheengsDecoder {version('TheengsDecoder')} in a Python loop, first 3,000 lines", theengs_wall, theengs_cpu,
         f"beaconctl decode {ours_wall / theengs_wall:,.0f}× faster (wall)"),
        (f"beacontools {version('beacontools')} in a Python loop, first 30,000 lines", tools_wall, tools_cpu,
         f"beaconctl decode {ours_wall / tools_wall:,.0f}× faster (wall)"),
    ]
    width = max(len(r[0]) for r in rows)
    for name, wall, cpu, ratio in rows:
        print(f"{name:<{width}}  {wall:>12,.0f}/s wall  {cpu:>12,.0f}/s CPU  {ratio}")
    return {"lines": len(all_lines), "beaconctlDecodeLinesPerSecond": round(ours_wall),
            "beaconctlDecodeCPULinesPerSecond": round(ours_cpu),
            "theengsProcessLinesPerSecond": round(theengs_wall), "beacontoolsProcessLinesPerSecond": round(tools_wall),
            "processRatios": {"theengs": round(ours_wall / theengs_wall), "beacontools": round(ours_wall / tools_wall)}}


def main():
    if sys.argv[1] == "decode-lines":
        decode_lines(sys.argv[2])
        return
    path, ours_path, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    lines_path, beaconctl = sys.argv[4], sys.argv[5]
    ads = reports(path)
    ours = {}
    with open(ours_path) as lines:
        for line in lines:
            record = json.loads(line)
            ours[record["name"]] = record

    theengs_inputs = [json.dumps({"id": address, "manufacturerdata": manufacturer_data(data).hex(), "rssi": rssi})
                      for address, data, rssi in ads]
    payloads = [data for _, data, _ in ads]
    tuples = [(data,) for data in payloads]

    # The slow decoder on a slice, so a run takes seconds rather than minutes.
    theengs = timed("TheengsDecoder", theengs_inputs[:2000], decodeBLE, runs,
                    lambda out: out is not None and json.loads(out).get("model_id") == "IBEACON")
    beacontools = timed("beacontools", payloads[:20000], parse_packet, runs,
                        lambda out: out is not None and out.major == 100)
    parse_advertisement_data_tuple.cache_clear()
    bdt = timed("bluetooth-data-tools", tuples, parse_advertisement_data_tuple, runs,
                lambda out: 0x004C in out[3])
    cache = parse_advertisement_data_tuple.cache_info()

    hci = ours["decode/hci-events"]["medianPerSecond"]
    ad = ours["decode/ad-payloads"]["medianPerSecond"]
    rows = [
        ("BeaconBridge: HCI LE Advertising Report events → beacons", hci, ""),
        ("BeaconBridge: advertising data → beacon (decodeBeacon)", ad, ""),
        (f"TheengsDecoder {version('TheengsDecoder')}: decodeBLE(JSON string)", theengs,
         f"BeaconBridge (advertising data) {ad / theengs:,.0f}× faster"),
        (f"beacontools {version('beacontools')}: parse_packet(advertising data)", beacontools,
         f"BeaconBridge {ad / beacontools:,.0f}× faster"),
        (f"bluetooth-data-tools {version('bluetooth-data-tools')}: parse_advertisement_data_tuple "
         f"(splits fields only; LRU cache {cache.hits} hits, {cache.misses} misses)", bdt,
         f"BeaconBridge decodes {ad / bdt:,.1f}× faster than it splits"),
    ]
    print(f"{len(ads):,} iBeacon advertisements from {len(set(payloads)):,} beacons; "
          f"CPython {platform.python_version()}; per second of one thread's CPU, median of {runs} runs")
    width = max(len(r[0]) for r in rows)
    for name, rate, ratio in rows:
        print(f"{name:<{width}}  {rate:>14,.0f}/s  {ratio}")
    whole = processes(lines_path, beaconctl, runs)
    print(json.dumps({"adverts": len(ads), "beaconBridgeHCIPerSecond": hci, "beaconBridgeADPerSecond": ad,
                      "theengsPerSecond": round(theengs), "beacontoolsPerSecond": round(beacontools),
                      "bluetoothDataToolsPerSecond": round(bdt),
                      "ratios": {"theengs": round(ad / theengs), "beacontools": round(ad / beacontools),
                                 "bluetoothDataTools": round(ad / bdt, 2)},
                      "processes": whole}))


if __name__ == "__main__":
    main()
