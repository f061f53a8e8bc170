import CommandLineSupport
import Foundation
import TestSupport
import Testing

/// `--help` on an 80-column terminal: every line fits, nothing the author wrapped by hand
/// is wrapped a second time (`HelpText`).
@Suite("--help at 80 columns")
struct HelpTextTests {
    @Test("a hand-wrapped paragraph wider than the terminal is filled again, not broken line by line")
    func paragraph() {
        let text = """
            Reads one hex string a line from stdin: either an advertising-data payload (AD structures)
            or a whole HCI event with its H4 type byte, starting 04 3E.
            """
        #expect(HelpText.fitted(text, width: 80) == """
            Reads one hex string a line from stdin: either an advertising-data payload (AD
            structures) or a whole HCI event with its H4 type byte, starting 04 3E.
            """)
        #expect(HelpText.fitted(text, width: 100) == text, "what fits is printed as written")
    }

    @Test("table rows keep their columns; labels, usage and examples keep their shape")
    func layouts() {
        let options = """
            OPTIONS:
              --start-at <TIME>       Replay: play the capture's first frame at this wall-clock time (ISO-8601 UTC).
              --log-level <log-level> trace, debug, info, notice, warning, error or critical.
              --join-on <immediate|sighting>
                                      With --source: join on immediate (default) or on any sighting.
            """
        #expect(HelpText.fitted(options, width: 60) == """
            OPTIONS:
              --start-at <TIME>       Replay: play the capture's first
                                      frame at this wall-clock time
                                      (ISO-8601 UTC).
              --log-level <log-level> trace, debug, info, notice,
                                      warning, error or critical.
              --join-on <immediate|sighting>
                                      With --source: join on immediate
                                      (default) or on any sighting.
            """)
        let table = """
            Ways to choose the beacon:
              --major M --minor m   join that beacon and stay until Ctrl-C (or --count).
              --source URI          a radio of its own: it ranges the iBeacons it hears,
                                    joins the nearest one.
            USAGE: beaconctl observe --client <ID> --major <major> --minor <minor>

            Example:
              beaconctl observe --broker mqtt://broker.lan --client ana --major 100 --minor 1
            """
        #expect(HelpText.fitted(table, width: 60) == """
            Ways to choose the beacon:
              --major M --minor m   join that beacon and stay until
                                    Ctrl-C (or --count).
              --source URI          a radio of its own: it ranges the
                                    iBeacons it hears, joins the nearest
                                    one.
            USAGE: beaconctl observe --client <ID> --major <major>
                   --minor <minor>

            Example:
              beaconctl observe --broker mqtt://broker.lan --client ana --major 100 --minor 1
            """)
    }

    static let commands: [[String]] = [
        ["beacon-gateway"], ["beacon-brain"], ["beacon-web"], ["beacon-web", "serve"], ["beacon-web", "hash-password"],
        ["beaconctl"], ["beaconctl", "decode"], ["beaconctl", "config"], ["beaconctl", "config", "check"],
        ["beaconctl", "config", "push"], ["beaconctl", "simulate"], ["beaconctl", "observe"], ["beaconctl", "advertise"],
        ["beaconctl", "range"], ["beaconctl", "bench"], ["beaconctl", "bridge"], ["beaconctl", "provision"],
    ]

    func help(_ command: [String], columns: Int, option: String = "--help") async throws -> String {
        let dir = try TemporaryDirectory("help")
        let process = try ChildProcess(Programs.built(command[0]), Array(command.dropFirst()) + [option],
                                       environment: ["COLUMNS": String(columns)], in: dir)
        #expect(await process.waitForExit(timeout: 30) == 0, "\(process.diagnostics)")
        return process.stdout
    }

    @Test("every program's --help fits 80 columns, says all it says at 1000, and wraps no line twice", arguments: commands)
    func programs(_ command: [String]) async throws {
        let narrow = try await help(command, columns: 80)
        let wide = try await help(command, columns: 1000)
        let lines = narrow.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(narrow.contains("USAGE: \(command.joined(separator: " "))"))
        for line in lines {
            #expect(line.count <= 80 || !line.trimmingCharacters(in: .whitespaces).contains(" "),
                    "\(command): \(line.count) columns: \(line)")
        }
        #expect(narrow.split(whereSeparator: \.isWhitespace) == wide.split(whereSeparator: \.isWhitespace),
                "\(command): the same words in the same order")
        // A line wrapped anew (not one of the author's) is full: the next line's first word,
        // when it continues at the same indent, did not fit on it. A hand-wrapped line
        // broken again leaves a short piece that fails this.
        let asWritten = Set(wide.split(separator: "\n"))
        for (line, next) in zip(lines, lines.dropFirst()) where !line.isEmpty && !asWritten.contains(line) {
            let indent = line.prefix { $0 == " " }.count
            guard next.prefix(while: { $0 == " " }).count == indent,
                  let word = next.split(separator: " ").first else { continue }
            #expect(line.count + 1 + word.count > 80, "\(command): \"\(line)\" could have held \"\(word)\"")
        }
    }

    @Test("--experimental-dump-help stays JSON at any width (the man pages are made from it)",
          arguments: ["beacon-gateway", "beacon-brain", "beaconctl", "beacon-web"])
    func dump(_ program: String) async throws {
        let json = try await help([program], columns: 80, option: "--experimental-dump-help")
        let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        #expect(object?["command"] != nil, "\(json.prefix(300))")
    }
}
