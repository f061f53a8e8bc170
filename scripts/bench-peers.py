"""Times other projects' BLE decoders on the advertisements in a hex file and prints them
beside BeaconBridge's figures measured on the same file in the same run (scripts/bench-peers).

Rates are per second of this thread's CPU time, the median of several runs, as
Benchmarks/ measures BeaconBridge. Each peer gets its input in the form it is normally
called with, prepared before timing starts.
"""
import json
import platform
import statistics
import sys
import time
from importlib.metadata import version

from beacontools import parse_packet
from bluetooth_data_tools import parse_advertisement_data_tuple
from TheengsDecoder import decodeBLE


def reports(path):
    """(address, advertising data, rssi) of every legacy report in the HCI events."""
    out = []
    with open(path) as lines:
        for line in lines:
            event = bytes.fromhex(line.strip())
            assert event[0] == 0x3E and event[2] == 0x02, "not an LE Advertising Report"
            offset = 4
            for _ in range(event[3]):
                address = ":".join(f"{b:02X}" for b in reversed(event[offset + 2:offset + 8]))
                length = event[offset + 8]
                data = event[offset + 9:offset + 9 + length]
                rssi = int.from_bytes(event[offset + 9 + length:offset + 10 + length], "little", signed=True)
                out.append((address, data, rssi))
                offset += 10 + length
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


def main():
    path, ours_path, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
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
    print(json.dumps({"adverts": len(ads), "beaconBridgeHCIPerSecond": hci, "beaconBridgeADPerSecond": ad,
                      "theengsPerSecond": round(theengs), "beacontoolsPerSecond": round(beacontools),
                      "bluetoothDataToolsPerSecond": round(bdt),
                      "ratios": {"theengs": round(ad / theengs), "beacontools": round(ad / beacontools),
                                 "bluetoothDataTools": round(ad / bdt, 2)}}))


if __name__ == "__main__":
    main()
