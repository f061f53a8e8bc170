import BeaconKit
import WebDisplay

/// Everything the browser loads, built into the binary: no CDN, no web fonts, no build step.
/// The pages are a shell (navigation, the page's data as JSON) and one script that draws
/// the data and redraws it on every Server-Sent Event.
enum Assets {
    // MARK: - Pages

    static func shell(title: String, page: String, events: String?, nav: String, main: String, json: String?) -> String {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escape(title)) · BeaconBridge</title>
        <link rel="stylesheet" href="/assets/app.css">
        </head>
        <body data-page="\(page)"\(events.map { " data-events=\"\(escape($0))\"" } ?? "") data-updates="0">
        <header class="bar">\(nav)</header>
        <main id="app">\(main)</main>
        \(json.map { "<script type=\"application/json\" id=\"initial\">\(scriptSafe($0))</script>" } ?? "")
        <script src="/assets/app.js"></script>
        </body></html>
        """
    }

    static func navigation(_ state: FleetState) -> String {
        var links = "<a class=\"brand\" href=\"/\">BeaconBridge</a><a href=\"/fleet\">Fleet</a><a href=\"/analytics\">Analytics</a>"
        for store in state.knownStores {
            let name = escape(state.storeName(store) ?? "Store \(store)")
            links += "<a href=\"/stores/\(store)/greeter\">\(name)</a><a href=\"/stores/\(store)/floor\">floor</a>"
        }
        return "<nav>\(links)</nav><form method=\"post\" action=\"/logout\"><button>Log out</button></form>"
    }

    static func page(_ page: FleetState.Page, state: FleetState, json: String) -> String {
        switch page {
        case .fleet:
            return shell(title: "Fleet", page: "fleet", events: "/events/fleet", nav: navigation(state), main: "", json: json)
        case .greeter(let store):
            return shell(title: (state.storeName(store) ?? "Store \(store)") + " greeter", page: "greeter",
                         events: "/events/stores/\(store)/greeter", nav: navigation(state), main: "", json: json)
        case .floor(let store):
            return shell(title: (state.storeName(store) ?? "Store \(store)") + " floor", page: "floor",
                         events: "/events/stores/\(store)/floor", nav: navigation(state), main: "", json: json)
        }
    }

    static func indexPage(_ state: FleetState, user: String?) -> String {
        var items = "<li><a href=\"/fleet\">Fleet dashboard</a>: every gateway's status and figures</li>"
        for store in state.knownStores {
            let name = escape(state.storeName(store) ?? "Store \(store)")
            items += "<li>\(name) (\(store)): <a href=\"/stores/\(store)/greeter\">greeter display</a> · "
                + "<a href=\"/stores/\(store)/floor\">floor</a></li>"
        }
        return shell(title: "BeaconBridge", page: "index", events: nil, nav: navigation(state),
                     main: "<h1>BeaconBridge</h1><ul class=\"index\">\(items)</ul>", json: nil)
    }

    /// The login form; `retryAfter` (s) when attempts are refused for now.
    static func loginPage(failed: Bool, next: String, retryAfter: Int? = nil) -> String {
        shell(title: "Log in", page: "login", events: nil, nav: "<nav><span class=\"brand\">BeaconBridge</span></nav>", main: """
            <form class="login" method="post" action="/login">
            <h1>Staff login</h1>
            \(failed ? "<p class=\"error\" role=\"alert\">Wrong name or password.</p>" : "")
            \(retryAfter.map { "<p class=\"error\" role=\"alert\">Too many failed attempts: try again in \($0) s.</p>" } ?? "")
            <label>Name <input name="username" autocomplete="username" required autofocus></label>
            <label>Password <input name="password" type="password" autocomplete="current-password" required></label>
            <input type="hidden" name="next" value="\(escape(next))">
            <button type="submit">Log in</button>
            </form>
            """, json: nil)
    }

    /// HTML text and attribute values.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for c in text.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// JSON inside a `<script>` element: `<` only occurs inside strings, where `\u003c` means the same.
    static func scriptSafe(_ json: String) -> String {
        json.replacing("<", with: "\\u003c")
    }

    // MARK: - Style

    static let style = #"""
    :root { --bg:#f6f5f2; --card:#fff; --ink:#1d232a; --muted:#5f6b76; --accent:#0b7a75; --warn:#b26b00; --bad:#c0262d;
            font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
    * { box-sizing: border-box; }
    body { margin:0; background:var(--bg); color:var(--ink); }
    .bar { display:flex; align-items:center; justify-content:space-between; gap:1rem; padding:.5rem 1rem;
           background:var(--ink); color:#fff; flex-wrap:wrap; }
    .bar nav { display:flex; gap:.9rem; flex-wrap:wrap; align-items:baseline; }
    .bar a { color:#d7f3f1; text-decoration:none; } .bar a:hover { text-decoration:underline; }
    .bar .brand { font-weight:700; color:#fff; margin-right:.5rem; }
    .bar button { background:transparent; color:#fff; border:1px solid #fff6; border-radius:.4rem; padding:.3rem .7rem; }
    body.offline .bar { background:var(--bad); }
    main { padding:1rem 1.25rem 2rem; max-width:1400px; margin:0 auto; }
    h1 { font-size:1.6rem; margin:.3rem 0 1rem; display:flex; gap:1rem; align-items:baseline; flex-wrap:wrap; }
    h1 .count { font-size:1rem; color:var(--muted); font-weight:400; }
    .empty { color:var(--muted); font-size:1.3rem; }
    .customers { list-style:none; padding:0; margin:0; display:grid; gap:1rem;
                 grid-template-columns:repeat(auto-fill, minmax(20rem, 1fr)); }
    .customer { background:var(--card); border-radius:1rem; padding:1rem; display:flex; gap:1rem; align-items:center;
                box-shadow:0 1px 3px #0002; }
    .customer.arriving { animation: arrive .6s ease-out; }
    @keyframes arrive { from { opacity:0; transform:translateY(-.5rem); } }
    .photo { width:5.5rem; height:5.5rem; border-radius:50%; object-fit:cover; flex:none; background:#dde6e5; }
    .initials { display:flex; align-items:center; justify-content:center; font-size:2rem; font-weight:700; color:var(--accent); }
    .who { min-width:0; }
    .name { font-size:1.6rem; font-weight:700; }
    .drink { font-size:1.25rem; margin:.2rem 0; }
    .meta { color:var(--muted); font-size:1rem; }
    .zone { font-weight:600; color:var(--accent); }
    .meta .at { white-space:nowrap; }
    /* App users whose tag is not in the store: apart, greyed, never in a zone's colour. */
    .notinrange h2 { color:var(--muted); }
    .customers.apart .customer { background:#eceae5; box-shadow:none; opacity:.8; }
    .customers.apart .photo { filter:grayscale(1); width:3.5rem; height:3.5rem; }
    .customers.apart .name { font-size:1.2rem; }
    .nozone { font-weight:600; color:var(--muted); }
    .floor { width:100%; height:auto; max-height:78vh; background:var(--card); border-radius:1rem; box-shadow:0 1px 3px #0002; }
    .floor .plan { fill:#fbfaf7; stroke:#c9c4b8; stroke-width:.08; }
    .floor .area { fill:#0b7a7512; stroke:#0b7a7540; stroke-width:.04; }
    .floor .gateway rect { fill:var(--accent); }
    .floor .gateway.attention rect { fill:var(--bad); }
    .floor .gateway.unknown rect, .floor .gateway.quiet rect, .floor .gateway.paused rect { fill:var(--warn); }
    .floor text { font-size:.42px; fill:var(--ink); }
    .floor .gateway text { font-weight:700; }
    .floor .dot { transition: transform .6s ease; }
    .floor .dot circle { fill:#7b8794; stroke:#fff; stroke-width:.06; }
    .floor .dot.customer circle { fill:#e07a1f; }
    .floor .dot text { font-size:.34px; }
    .legend { display:flex; gap:1.5rem; flex-wrap:wrap; margin:.8rem 0; color:var(--muted); }
    .legend .zonelist b { color:var(--ink); }
    table { border-collapse:collapse; width:100%; background:var(--card); border-radius:.8rem; overflow:hidden;
            box-shadow:0 1px 3px #0002; font-variant-numeric: tabular-nums; }
    th, td { padding:.45rem .6rem; text-align:left; border-bottom:1px solid #eee; white-space:nowrap; }
    th { background:#eef2f1; font-size:.85rem; color:var(--muted); font-weight:600; }
    td.num { text-align:right; }
    td.battery.low { color:var(--bad); font-weight:700; }
    td.source { max-width:12rem; overflow:hidden; text-overflow:ellipsis; }
    td.wrap { white-space:normal; min-width:8rem; }
    .scroll { overflow-x:auto; }
    tr.attention { background:#fde8e8; } tr.attention td:first-child { border-left:.35rem solid var(--bad); }
    tr.quiet, tr.paused, tr.unknown { background:#fff6e5; }
    tr.dated td.figure { color:#8a949d; font-style:italic; }
    /* A tablet (768 px) and narrower: each gateway a block of labelled figures, nothing off-screen. */
    @media (max-width: 1000px) {
      table.gateways, table.gateways tbody { display:block; }
      table.gateways thead { display:none; }
      table.gateways tr { display:grid; grid-template-columns:repeat(auto-fill, minmax(8.5rem, 1fr));
                          border-bottom:1px solid #ddd; padding:.3rem 0; }
      table.gateways td { border:0; white-space:normal; overflow-wrap:anywhere; text-align:left; min-width:0; }
      table.gateways td.source { max-width:none; grid-column:span 2; }
      table.gateways tr.attention { border-left:.35rem solid var(--bad); }
      table.gateways tr.attention td:first-child { border-left:0; }
      table.gateways td.wrap { grid-column:1 / -1; }
      table.gateways td::before { content:attr(data-label); display:block; font-size:.75rem; color:var(--muted);
                                  font-style:normal; }
    }
    .badge { display:inline-block; padding:.1rem .5rem; border-radius:1rem; font-size:.8rem; font-weight:700; color:#fff; background:var(--accent); }
    .badge.offline, .badge.late, .badge.stalled { background:var(--bad); }
    .badge.quiet, .badge.paused, .badge.unknown { background:var(--warn); }
    .summary { display:flex; gap:1rem; flex-wrap:wrap; margin-bottom:1rem; }
    .summary div { background:var(--card); border-radius:.8rem; padding:.6rem 1rem; box-shadow:0 1px 3px #0002; }
    .summary b { font-size:1.5rem; display:block; }
    .summary .bad b { color:var(--bad); }
    h2 { font-size:1.15rem; margin:1.5rem 0 .6rem; }
    .login { max-width:22rem; margin:3rem auto; background:var(--card); padding:1.5rem; border-radius:1rem;
             box-shadow:0 1px 3px #0002; display:grid; gap:.8rem; }
    .login input { display:block; width:100%; font-size:1.1rem; padding:.5rem; margin-top:.25rem; }
    .login button { font-size:1.1rem; padding:.6rem; background:var(--accent); color:#fff; border:0; border-radius:.5rem; }
    .error { color:var(--bad); font-weight:600; }
    .stale { background:var(--bad); color:#fff; padding:.5rem .8rem; border-radius:.5rem; font-weight:600; }
    .index { font-size:1.2rem; line-height:2; }
    /* The analytics page: the chain's stores side by side (two columns from about 900 px,
       so at 1280 px; one on a phone), each chart scaled as a whole (its text keeps its shape). */
    .pickers { display:flex; gap:1rem; align-items:center; flex-wrap:wrap; margin:.5rem 0 1rem; }
    .stores { display:grid; gap:1rem; grid-template-columns:repeat(auto-fit, minmax(min(26rem, 100%), 1fr)); }
    .store, .chain { background:var(--card); border-radius:1rem; padding:1rem; box-shadow:0 1px 3px #0002; min-width:0; }
    .store h2, .chain h2 { margin-top:0; }
    .chain { margin-bottom:1rem; }
    .figures { display:grid; grid-template-columns:repeat(3, 1fr); gap:.5rem 1rem; margin:0 0 .5rem; }
    .figures dt { color:var(--muted); font-size:.85rem; } .figures dd { margin:0; font-size:1.4rem; font-weight:600; }
    .figures small { font-size:.8rem; color:var(--muted); font-weight:400; }
    .store h3 { font-size:.95rem; color:var(--muted); margin:.8rem 0 .2rem; }
    .chart { width:100%; height:auto; display:block; overflow:visible; }
    .chart rect { fill:var(--accent); } .chart.occupancy rect { fill:var(--warn); }
    .chart text { font-size:10px; fill:var(--muted); } .chart .axis { stroke:#ccc; }
    table.zones { border-collapse:collapse; width:100%; } table.zones th, table.zones td { text-align:left; padding:.2rem .4rem; }
    """#

    // MARK: - Script

    static let script = #"""
    (function () {
      'use strict';
      var body = document.body, app = document.getElementById('app'), kind = body.dataset.page;
      var initial = document.getElementById('initial');
      if (!initial) return;
      var data = JSON.parse(initial.textContent), skew = 0, SVG = 'http://www.w3.org/2000/svg';

      function el(tag, attrs) {
        var node = document.createElement(tag);
        for (var k in attrs || {}) if (attrs[k] !== null && attrs[k] !== undefined) node.setAttribute(k, attrs[k]);
        (function add(list) {
          for (var i = 0; i < list.length; i++) {
            var c = list[i];
            if (c === null || c === undefined) continue;
            if (Array.isArray(c)) add(c); else node.append(c instanceof Node ? c : String(c));
          }
        })(Array.prototype.slice.call(arguments, 2));
        return node;
      }
      function svg(tag, attrs) {
        var node = document.createElementNS(SVG, tag);
        for (var k in attrs) node.setAttribute(k, attrs[k]);
        return node;
      }
      function initials(name) {
        return name.split(/\s+/).filter(Boolean).slice(0, 2).map(function (w) { return w[0].toUpperCase(); }).join('');
      }
      function ago(ts) {
        if (!ts) return '—';
        var s = Math.max(0, Math.round((Date.now() + skew - Date.parse(ts)) / 1000));
        if (s < 60) return s < 10 ? 'just now' : s + ' s';
        var m = Math.floor(s / 60);
        if (m < 60) return m + ' min';
        return Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
      }
      function fixed(v, places) { return v === null || v === undefined ? '—' : Number(v).toFixed(places); }

      function clock(ts) {
        var d = new Date(Date.parse(ts) - skew);
        return ('0' + d.getHours()).slice(-2) + ':' + ('0' + d.getMinutes()).slice(-2);
      }
      // "how long" beside a time of day: the ages move every second, the times stay.
      function since(label, ts) {
        return el('span', { 'class': 'at' }, label + ' since ' + clock(ts) + ' · ',
                  el('span', { 'class': 'since', 'data-since': ts }, ago(ts)));
      }
      var greeted = null;
      function greeter() {
        var inside = el('ul', { 'class': 'customers' }), outside = el('ul', { 'class': 'customers apart' });
        var first = greeted === null, now = {}, n = 0, apart = 0;
        data.customers.forEach(function (c) {
          var who = c.name || c.client, arriving = !first && !greeted[c.client];
          now[c.client] = true;
          var meta = c.inRange
            ? [el('div', { 'class': 'meta instore' }, since('in store', c.since)),
               c.zone ? el('div', { 'class': 'meta inzone' }, el('span', { 'class': 'zone' }, c.zone),
                           ' ', since('at ' + c.zone, c.zoneSince)) : null]
            : [el('div', { 'class': 'meta' }, el('span', { 'class': 'nozone' }, 'not in range'),
                  ' · joined at ' + clock(c.since))];
          var card = el('li', { 'class': 'customer' + (arriving ? ' arriving' : '') + (c.inRange ? '' : ' outside'),
                                'data-client': c.client, 'data-beacon': c.beacon,
                                'data-away': c.away ? 'true' : null },
            c.photo ? el('img', { 'class': 'photo', src: c.photo, alt: who })
                    : el('div', { 'class': 'photo initials', 'aria-hidden': 'true' }, initials(who)),
            el('div', { 'class': 'who' },
              el('div', { 'class': 'name' }, who),
              el('div', { 'class': 'drink' }, c.favorite ? '☕ ' + c.favorite : ''), meta));
          if (c.inRange) { inside.append(card); n++; } else { outside.append(card); apart++; }
        });
        greeted = now;
        app.replaceChildren(
          el('h1', {}, (data.name || 'Store ' + data.store) + ' — who is in',
             el('span', { 'class': 'count' }, n === 1 ? '1 customer' : n + ' customers')),
          n ? inside : el('p', { 'class': 'empty' }, 'No customer is in the shop right now.'),
          apart ? el('section', { 'class': 'notinrange' },
                     el('h2', {}, 'Joined, not in range', el('span', { 'class': 'count' }, ' ' + apart)),
                     outside) : null);
      }

      var floorNodes = null;
      function floor() {
        var W = data.plan.width, H = data.plan.height;
        if (!floorNodes || floorNodes.w !== W || floorNodes.h !== H) {
          var root = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, 'class': 'floor', role: 'img',
                                  'aria-label': 'store floor' });
          root.append(svg('rect', { x: 0, y: 0, width: W, height: H, 'class': 'plan' }));
          var areas = svg('g', {}), gws = svg('g', {}), dots = svg('g', {});
          root.append(areas, gws, dots);
          floorNodes = { w: W, h: H, root: root, areas: areas, gws: gws, dots: dots, byBeacon: {},
                         title: el('h1', {}), legend: el('div', { 'class': 'legend' }) };
          app.replaceChildren(floorNodes.title, root, floorNodes.legend);
        }
        var f = floorNodes;
        f.title.replaceChildren((data.name || 'Store ' + data.store) + ' — floor',
          el('span', { 'class': 'count' }, data.dots.length + ' beacons present'));
        f.areas.replaceChildren(); f.gws.replaceChildren();
        data.gateways.forEach(function (g) {
          f.areas.append(svg('circle', { cx: g.x, cy: g.y, r: 2.2, 'class': 'area' }));
          var attention = g.condition === 'offline' || g.condition === 'late' || g.condition === 'stalled';
          var node = svg('g', { 'class': 'gateway ' + g.condition + (attention ? ' attention' : ''), 'data-id': g.id,
                                transform: 'translate(' + g.x + ',' + g.y + ')' });
          node.append(svg('rect', { x: -0.3, y: -0.3, width: 0.6, height: 0.6, rx: 0.1 }));
          var label = svg('text', { x: 0.45, y: -0.4 }); label.textContent = g.zone + (g.placed ? '' : ' (not placed)');
          node.append(label);
          f.gws.append(node);
        });
        var seen = {};
        data.dots.forEach(function (d) {
          seen[d.beacon] = true;
          var node = f.byBeacon[d.beacon];
          if (!node) {
            node = svg('g', {});
            node.append(svg('circle', { r: 0.32 }), svg('text', { x: 0.42, y: 0.12 }));
            f.dots.append(node);
            f.byBeacon[d.beacon] = node;
          }
          node.setAttribute('class', 'dot' + (d.customer ? ' customer' : ''));
          node.setAttribute('data-beacon', d.beacon);
          node.setAttribute('data-zone', d.zone);
          node.setAttribute('transform', 'translate(' + d.x + ',' + d.y + ')');
          node.lastChild.textContent = d.label;
        });
        Object.keys(f.byBeacon).forEach(function (b) { if (!seen[b]) { f.byBeacon[b].remove(); delete f.byBeacon[b]; } });
        var zones = data.gateways.map(function (g) {
          var here = data.dots.filter(function (d) { return d.zone === g.id; }).map(function (d) { return d.label; });
          return el('div', { 'class': 'zonelist', 'data-zone': g.id }, el('b', {}, g.zone), ': ',
                    here.length ? here.join(', ') : 'nobody');
        });
        f.legend.replaceChildren.apply(f.legend, zones);
      }

      function fleet() {
        var rows = data.gateways.map(function (g) {
          var cal = g.calibration ? 'n ' + g.calibration.pathLossExponent + ', ' +
            (g.calibration.rssiOffset >= 0 ? '+' : '') + g.calibration.rssiOffset + ' dB, ' + g.calibration.distanceModel : '—';
          if (g.learned) {
            cal += '; learned ' + (g.learned.pinned ? 'nothing (pinned)' :
              (g.learned.rssiOffset >= 0 ? '+' : '') + g.learned.rssiOffset + ' dB, store n ' + g.learned.pathLossExponent);
          }
          // An offline or late gateway's last figures are not current: greyed, and dated on hover.
          var heard = g.lastHealth ? ago(g.lastHealth).replace(/^(\d.*)$/, '$1 ago') : 'never';
          function figure(label, value) {
            return el('td', g.stale ? { 'class': 'num figure', 'data-label': label, title: 'last heard ' + heard + ', not current' }
                                    : { 'class': 'num figure', 'data-label': label }, value);
          }
          return el('tr', { 'class': 'gateway ' + g.condition + (g.attention ? ' attention' : '') + (g.stale ? ' dated' : ''),
                            'data-id': g.id, 'data-condition': g.condition },
            el('td', { 'data-label': 'Gateway' }, el('b', {}, g.id)), el('td', { 'data-label': 'Zone' }, g.zone || ''),
            el('td', { 'data-label': 'Condition' }, el('span', { 'class': 'badge ' + g.condition }, g.condition)),
            el('td', { 'class': 'source' + (g.stale ? ' figure' : ''), 'data-label': 'Source', title: g.source || '' },
               (g.sourceState || '—') + (g.source ? ' · ' + g.source : '')),
            figure('Adverts/s', fixed(g.advertsPerSecond, 1)),
            figure('Decoded/s', fixed(g.decodedPerSecond, 1)),
            figure('Malformed', fixed(g.malformed, 0)),
            figure('Dropped', fixed(g.dropped, 0)),
            figure('Tracked', fixed(g.tracked, 0)),
            el('td', { 'data-label': 'Last health' }, heard),
            el('td', { 'class': 'wrap', 'data-label': 'Calibration' }, cal), el('td', { 'data-label': 'Version' }, g.version || ''));
        });
        var head = el('tr', {}, 'Gateway,Zone,Condition,Source,Adverts/s,Decoded/s,Malformed,Dropped,Tracked,Last health,Calibration,Version'
          .split(',').map(function (h) { return el('th', {}, h); }));
        var stores = data.stores.map(function (s) {
          return el('tr', { 'class': 'store', 'data-store': s.store },
            el('td', {}, el('b', {}, s.name || 'Store ' + s.store)), el('td', { 'class': 'num' }, s.store),
            el('td', { 'class': 'num' }, s.customers), el('td', { 'class': 'num' }, s.beacons),
            el('td', {}, el('a', { href: '/stores/' + s.store + '/greeter' }, 'greeter'), ' · ',
                         el('a', { href: '/stores/' + s.store + '/floor' }, 'floor')));
        });
        var storeHead = el('tr', {}, 'Store,Major,Customers,Beacons,Pages'.split(',').map(function (h) { return el('th', {}, h); }));
        // Registry beacons: battery and when last seen ("not seen for N h").
        function seen(b) {
          if (b.present) return 'seen now';
          if (!b.lastSeen) return 'never seen';
          var s = Math.max(0, (Date.now() + skew - Date.parse(b.lastSeen)) / 1000);
          return 'not seen for ' + (s < 3600 ? Math.floor(s / 60) + ' min' : Math.floor(s / 3600) + ' h');
        }
        var beacons = (data.beacons || []).map(function (b) {
          return el('tr', { 'class': 'beacon' + (b.missing || b.batteryLow ? ' attention' : ''), 'data-beacon': b.beacon },
            el('td', {}, el('b', {}, b.name || b.beacon)), el('td', {}, b.beacon), el('td', { 'class': 'num' }, b.store === null ? '' : b.store),
            el('td', { 'class': 'num battery' + (b.batteryLow ? ' low' : '') }, b.battery === null ? '—' : b.battery + ' mV'),
            el('td', { 'class': 'seen' }, seen(b)));
        });
        var beaconHead = el('tr', {}, 'Beacon,Id,Store,Battery,Seen'.split(',').map(function (h) { return el('th', {}, h); }));
        app.replaceChildren(
          el('h1', {}, 'Fleet'),
          el('div', { 'class': 'summary' },
            el('div', {}, el('b', { id: 'online' }, data.online + ' / ' + data.gateways.length), 'gateways up'),
            el('div', { 'class': data.attention ? 'bad' : '' }, el('b', { id: 'attention' }, data.attention), 'need attention'),
            el('div', { 'class': data.brain === 'online' ? '' : 'bad' }, el('b', { id: 'brain' }, data.brain), 'brain'),
            el('div', { 'class': data.malformed ? 'bad' : '', title: data.lastMalformed ?
                          'last: ' + data.lastMalformed.topic + ': ' + data.lastMalformed.reason : '' },
               el('b', { id: 'malformed' }, data.malformed), 'unreadable messages')),
          data.lastMalformed ? el('p', { 'class': 'malformed' }, 'Last unreadable message (', ago(data.lastMalformed.at),
                                  '): ', el('code', {}, data.lastMalformed.topic), ' ', data.lastMalformed.reason) : '',
          el('div', { 'class': 'scroll' }, el('table', { 'class': 'gateways' }, el('thead', {}, head), el('tbody', {}, rows))),
          el('h2', {}, 'Stores'),
          el('table', { 'class': 'stores' }, el('thead', {}, storeHead), el('tbody', {}, stores)),
          beacons.length ? el('h2', {}, 'Beacons') : null,
          beacons.length ? el('table', { 'class': 'beacons' }, el('thead', {}, beaconHead), el('tbody', {}, beacons)) : null);
      }

      var draw = { greeter: greeter, floor: floor, fleet: fleet }[kind];
      var stale = el('p', { 'class': 'stale', role: 'status' },
                     'Not connected to the broker: this may be out of date. Reconnecting…');
      function render() {
        skew = Date.parse(data.now) - Date.now();
        draw();
        if (!data.live) app.prepend(stale);
        body.classList.toggle('stale-data', !data.live);
      }
      render();
      setInterval(function () {
        document.querySelectorAll('[data-since]').forEach(function (n) { n.textContent = ago(n.dataset.since); });
      }, 1000);
      if (body.dataset.events && window.EventSource) {
        var source = new EventSource(body.dataset.events);
        source.onmessage = function (e) {
          data = JSON.parse(e.data);
          render();
          body.dataset.updates = String(Number(body.dataset.updates) + 1);
          body.classList.remove('offline');
        };
        source.onerror = function () { body.classList.add('offline'); };
      }
    })();
    """#
}
