public import BeaconKit

extension HistoryFigures {
    /// `{"from","to","footfall","conversion","reachedCounter","returning","visit":{…},
    /// "queue":{…},"zones":[{"zone","zoneName","visits","median","p90","mean"}],
    /// "hourly":[{"start","visits"}],"daily":[…],"weekly":[…],"occupancy":[{"start","peak"}]}`;
    /// durations in seconds.
    public var json: JSONValue {
        func distribution(_ d: Distribution) -> JSONValue {
            let members: [(key: String, value: JSONValue)] = [
                (key: "count", value: .number(Double(d.count))), (key: "median", value: .number(rounded(d.median, 1))),
                (key: "p90", value: .number(rounded(d.p90, 1))), (key: "mean", value: .number(rounded(d.mean, 1))),
            ]
            return .object(JSONObject(members))
        }
        func buckets(_ list: [Bucket]) -> JSONValue {
            .array(list.map { bucket -> JSONValue in
                .object(JSONObject([(key: "start", value: .string(bucket.start.iso8601)),
                                    (key: "visits", value: .number(Double(bucket.visits)))]))
            })
        }
        let zoneList: [JSONValue] = zones.map { z -> JSONValue in
            .object(JSONObject([(key: "zone", value: .string(z.zone)), (key: "zoneName", value: .string(z.zoneName)),
                                (key: "dwell", value: distribution(z.dwell))]))
        }
        let occupancyList: [JSONValue] = occupancy.map { o -> JSONValue in
            .object(JSONObject([(key: "start", value: .string(o.start.iso8601)), (key: "peak", value: .number(Double(o.peak)))]))
        }
        let conversionValue: JSONValue = conversion.map { .number(rounded($0, 4)) } ?? .null
        var members: [(key: String, value: JSONValue)] = []
        members.append((key: "from", value: .string(from.iso8601)))
        members.append((key: "to", value: .string(to.iso8601)))
        members.append((key: "footfall", value: .number(Double(footfall))))
        members.append((key: "reachedCounter", value: .number(Double(reachedCounter))))
        members.append((key: "conversion", value: conversionValue))
        members.append((key: "returning", value: .number(Double(returning))))
        members.append((key: "visit", value: distribution(visitDuration)))
        members.append((key: "queue", value: distribution(queueTime)))
        members.append((key: "zones", value: .array(zoneList)))
        members.append((key: "hourly", value: buckets(hourly)))
        members.append((key: "daily", value: buckets(daily)))
        members.append((key: "weekly", value: buckets(weekly)))
        members.append((key: "occupancyStep", value: .number(occupancyStep)))
        members.append((key: "occupancy", value: .array(occupancyList)))
        return .object(JSONObject(members))
    }

    /// One row per hour: `store,hour,footfall,peak occupancy` (the hour's peak is the most
    /// of its occupancy steps); a spreadsheet's view of the window.
    public func csvRows(store: String) -> [String] {
        hourly.map { bucket in
            let peak = occupancy.filter { $0.start >= bucket.start && $0.start < bucket.start + 3600 }.map(\.peak).max() ?? 0
            return "\(store),\(bucket.start.iso8601),\(bucket.visits),\(peak)"
        }
    }

    public static let csvHeader = "store,hour,footfall,peakOccupancy"
}

/// A duration for people: `45 s`, `4 min 12 s`, `1 h 05 min`.
public func humanDuration(_ seconds: Double) -> String {
    let s = Int(seconds.rounded())
    if s < 60 { return "\(s) s" }
    if s < 3600 { return "\(s / 60) min \(s % 60 < 10 ? "0" : "")\(s % 60) s" }
    let m = (s / 60) % 60
    return "\(s / 3600) h \(m < 10 ? "0" : "")\(m) min"
}
