import BeaconKit
import Config
import History
import WebDisplay

/// The analytics page (`/analytics`): the history's figures for a day or a week, every
/// store side by side, with its charts drawn as inline SVG on the server (no script, no
/// CDN), and the same figures as CSV (`/analytics.csv`).
enum AnalyticsPage {
    /// What the page shows: a day or a week (Monday first) that begins at `start`.
    struct Window: Sendable, Equatable {
        enum Range: String, Sendable { case day, week }
        var range: Range
        var start: CaptureTime
        var end: CaptureTime { start + (range == .day ? 86_400 : 7 * 86_400) }

        /// From `?range=day|week&date=YYYY-MM-DD` (default: today), in the stores' clock.
        init(range text: String?, date: String?, now: CaptureTime, utcOffsetMinutes offset: Int) {
            range = Range(rawValue: text ?? "") ?? .day
            let shift = Double(offset * 60)
            var day = ((now.seconds + shift) / 86_400).rounded(.down) * 86_400 - shift
            if let date, date.count == 10, let parsed = CaptureTime(iso8601: date + "T00:00:00Z") {
                day = parsed.seconds - shift
            }
            if range == .week {
                // 1970-01-01 was a Thursday: day 4 after it was a Monday.
                let local = ((day + shift) / 86_400).rounded(.down)
                let weekday = (Int(local) + 3) % 7
                day -= Double((weekday + 7) % 7) * 86_400
            }
            start = CaptureTime(seconds: day)
        }

        /// `YYYY-MM-DD` of `t` in the stores' clock.
        static func date(_ t: CaptureTime, offset: Int) -> String { String((t + Double(offset * 60)).iso8601.prefix(10)) }
    }

    struct Store {
        var store: UInt16
        var name: String
        var figures: HistoryFigures
    }

    static func page(stores: [Store], chain: HistoryFigures?, window: Window, offset: Int, nav: String, problem: String?) -> String {
        let date = Window.date(window.start, offset: offset)
        let previous = Window.date(window.start - (window.range == .day ? 86_400 : 7 * 86_400), offset: offset)
        let next = Window.date(window.end, offset: offset)
        let range = window.range.rawValue
        var main = """
            <h1>Analytics <span class="count">\(window.range == .day ? "day" : "week") of \(date)</span></h1>
            <form class="pickers" method="get" action="/analytics">
            <a href="/analytics?range=\(range)&amp;date=\(previous)" rel="prev">◀ earlier</a>
            <label>From <input type="date" name="date" value="\(date)"></label>
            <label>Show <select name="range">
            <option value="day"\(window.range == .day ? " selected" : "")>a day</option>
            <option value="week"\(window.range == .week ? " selected" : "")>a week</option></select></label>
            <button type="submit">Show</button>
            <a href="/analytics?range=\(range)&amp;date=\(next)" rel="next">later ▶</a>
            <a class="csv" href="/analytics.csv?range=\(range)&amp;date=\(date)" download>CSV</a>
            </form>
            """
        if let problem {
            main += "<p class=\"empty\">\(Assets.escape(problem))</p>"
        } else {
            if let chain, stores.count > 1 {
                main += "<section class=\"chain\"><h2>Chain (\(stores.count) stores)</h2>\(summary(chain))</section>"
            }
            main += "<div class=\"stores\">"
            for store in stores { main += card(store, window: window, offset: offset) }
            main += "</div>"
            if stores.isEmpty { main += "<p class=\"empty\">No visits in this \(range).</p>" }
        }
        return Assets.shell(title: "Analytics", page: "analytics", events: nil, nav: nav, main: main, json: nil)
    }

    static func summary(_ f: HistoryFigures) -> String {
        func spread(_ d: HistoryFigures.Distribution) -> String {
            d.count == 0 ? "–" : "\(humanDuration(d.median)) <small>p90 \(humanDuration(d.p90))</small>"
        }
        let conversion = f.conversion.map { decimal($0 * 100) + " %" } ?? "–"
        return """
            <dl class="figures">
            <div><dt>Footfall</dt><dd data-figure="footfall">\(f.footfall)</dd></div>
            <div><dt>Reached the counter</dt><dd data-figure="conversion">\(conversion)</dd></div>
            <div><dt>Visit</dt><dd data-figure="visit">\(spread(f.visitDuration))</dd></div>
            <div><dt>Queue</dt><dd data-figure="queue">\(spread(f.queueTime))</dd></div>
            <div><dt>Returning</dt><dd data-figure="returning">\(f.returning)</dd></div>
            <div><dt>Most in at once</dt><dd data-figure="peak">\(f.occupancy.map(\.peak).max() ?? 0)</dd></div>
            </dl>
            """
    }

    static func card(_ store: Store, window: Window, offset: Int) -> String {
        let f = store.figures
        let footfall: [(String, Int)] = window.range == .day
            ? f.hourly.map { (String((($0.start + Double(offset * 60)).iso8601).dropFirst(11).prefix(2)), $0.visits) }
            : f.daily.map { (String(Window.date($0.start, offset: offset).suffix(5)), $0.visits) }
        let occupancy: [(String, Int)] = f.occupancy.map {
            (String((($0.start + Double(offset * 60)).iso8601).dropFirst(window.range == .day ? 11 : 5).prefix(window.range == .day ? 5 : 11)), $0.peak)
        }
        var zones = ""
        for zone in f.zones {
            zones += "<tr><td>\(Assets.escape(zone.zoneName))</td><td>\(zone.dwell.count)</td>"
                + "<td>\(humanDuration(zone.dwell.median))</td><td>\(humanDuration(zone.dwell.p90))</td></tr>"
        }
        return """
            <section class="store" data-store="\(store.store)">
            <h2>\(Assets.escape(store.name)) <span class="count">\(store.store)</span></h2>
            \(summary(f))
            <h3>Footfall per \(window.range == .day ? "hour" : "day")</h3>
            \(bars(footfall, label: "Footfall per \(window.range == .day ? "hour" : "day") in \(store.name)", kind: "footfall"))
            <h3>Most people in at once</h3>
            \(bars(occupancy, label: "Occupancy in \(store.name)", kind: "occupancy", every: window.range == .day ? 8 : 24))
            <h3>Time in each zone</h3>
            <table class="zones"><thead><tr><th>Zone</th><th>Visits</th><th>Median</th><th>p90</th></tr></thead>
            <tbody>\(zones)</tbody></table>
            </section>
            """
    }

    /// A bar chart as inline SVG: one bar per value, a label under every `every`-th. It
    /// scales as a whole with the page's width (the default `preserveAspectRatio`): its
    /// labels keep their shape. Its style is app.css's: the page's CSP allows no `<style>`.
    static func bars(_ values: [(label: String, value: Int)], label: String, kind: String, every: Int = 1) -> String {
        let width = 600.0, height = 160.0, bottom = 18.0, top = 14.0
        let most = max(1, values.map(\.value).max() ?? 0)
        let step = width / Double(max(1, values.count))
        var out = "<svg class=\"chart \(kind)\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\" "
            + "aria-label=\"\(Assets.escape(label))\">"
        out += "<line class=\"axis\" x1=\"0\" y1=\"\(height - bottom)\" x2=\"\(width)\" y2=\"\(height - bottom)\"/>"
        out += "<text class=\"scale\" x=\"2\" y=\"10\">\(most)</text>"
        for (i, item) in values.enumerated() {
            let h = (height - bottom - top) * Double(item.value) / Double(most)
            let x = Double(i) * step
            out += "<rect x=\"\(decimal(x + step * 0.1))\" y=\"\(decimal(height - bottom - h))\" width=\"\(decimal(step * 0.8))\" "
                + "height=\"\(decimal(h))\" data-value=\"\(item.value)\"><title>\(Assets.escape(item.label)): \(item.value)</title></rect>"
            if i % every == 0 {
                out += "<text x=\"\(decimal(x + step / 2))\" y=\"\(height - 4)\" text-anchor=\"middle\">\(Assets.escape(item.label))</text>"
            }
        }
        return out + "</svg>"
    }

    /// The CSV export: one row per store and hour (`store,hour,footfall,peakOccupancy`).
    static func csv(stores: [Store]) -> String {
        var lines = [HistoryFigures.csvHeader]
        for store in stores { lines += store.figures.csvRows(store: String(store.store)) }
        return lines.joined(separator: "\n") + "\n"
    }

    static func decimal(_ value: Double) -> String {
        let r = (value * 10).rounded() / 10
        return r == r.rounded() ? String(Int(r)) : String(r)
    }
}
