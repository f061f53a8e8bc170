import SystemCalls

#if canImport(Glibc)
import Glibc
#endif

/// `--help` fitted to the terminal without wrapping the author's lines a second time.
///
/// Our help texts are laid out by hand: paragraphs wrapped at about 90 columns, tables of
/// topics whose descriptions continue on indented lines, examples. swift-argument-parser
/// wraps every line on its own to the terminal's width, so at 80 columns a hand-wrapped
/// line loses its last word or two to a line of their own, and a table row's overflow
/// lands at the left margin. Instead, the help is rendered without wrapping and then fitted
/// block by block: a block that fits is printed exactly as written; one that does not is
/// joined and filled again, with the hanging indent its layout implies.
///
/// Blocks: a paragraph (consecutive lines at the left margin; a leading `WORD: ` such as
/// `USAGE: ` sets the indent of the lines after the first), or an indented line with the
/// lines that continue it further indented. A continuation's indent is the block's hanging
/// indent; without one, 26 in ArgumentParser's `OPTIONS:`, `ARGUMENTS:` and `SUBCOMMANDS:`
/// sections (its label column), else the column after the first gap of two or more spaces
/// (a table row), else four more than the line's own indent. An indented label on a line of
/// its own stays there, and so does a line under `Example:` or `Examples:` (a command:
/// wrapped by the terminal, it still pastes as one).
public enum HelpText {
    /// The width swift-argument-parser would use: `COLUMNS`, else the terminal on stdout,
    /// else 80.
    public static var terminalWidth: Int {
        if let value = Environment.value("COLUMNS"), let columns = Int(value), columns > 0 { return columns }
        var size = winsize()
        if ioctl(1, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return 80
    }

    /// A width at which ArgumentParser wraps nothing: the help as written, for `fitted`.
    static let unwrapped = 100_000

    /// `text` with every line at most `width` columns (a word longer than a line stands alone).
    public static func fitted(_ text: String, width: Int) -> String {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(Line.init)
        var output: [String] = []
        var inLabelSection = false
        var inExamples = false
        var index = 0
        while index < lines.count {
            let first = lines[index]
            index += 1
            if first.isBlank {
                inLabelSection = false
                inExamples = false
                output.append(String(first.text))
                continue
            }
            if first.indent == 0, first.isSectionHeading {
                inLabelSection = ["OPTIONS:", "ARGUMENTS:", "SUBCOMMANDS:"].contains(first.text)
                output.append(String(first.text))
                continue
            }
            if first.indent == 0 { inExamples = first.text.hasPrefix("Example") && first.text.hasSuffix(":") }
            var block = [first]
            while index < lines.count, !lines[index].isBlank,
                  first.indent == 0 ? lines[index].indent == 0 && !lines[index].isSectionHeading
                                    : lines[index].indent > first.indent {
                block.append(lines[index])
                index += 1
            }
            if block.allSatisfy({ $0.width <= width })
                || (inExamples && first.indent > 0) {
                // As written: it fits, or it is an example command line, which is better
                // wrapped by the terminal than broken where pasting it would break it.
                output += block.map { String($0.text) }
                continue
            }
            if first.indent == 0 {
                output += fill(block, width: width, hang: min(first.labelPrefixWidth ?? 0, width / 2))
            } else if block.count > 1, first.columnAfterGap == nil, first.width <= width {
                // A label on a line of its own (`--join-on <immediate|sighting>`): it stays
                // so, and what it introduces is filled where it begins.
                output.append(String(first.text))
                output += fill(Array(block.dropFirst()), width: width, hang: min(block[1].indent, width / 2))
            } else {
                let hang = block.count > 1 ? block[1].indent
                    : inLabelSection ? 26 : first.columnAfterGap ?? first.indent + 4
                output += fill(block, width: width, hang: min(hang, width / 2))
            }
        }
        return output.joined(separator: "\n")
    }

    /// The block's words, filled greedily: the first line keeps its indent and the spacing
    /// within it (a table row's gap), the lines after it start at `hang`.
    static func fill(_ block: [Line], width: Int, hang: Int) -> [String] {
        var pieces: [(spaces: Int, word: Substring)] = []
        for (number, line) in block.enumerated() {
            var spaces = number == 0 ? line.indent : 1
            for word in line.text.dropFirst(line.indent).split(separator: " ", omittingEmptySubsequences: false) {
                if word.isEmpty {
                    spaces += 1
                } else {
                    pieces.append((spaces, word))
                    spaces = 1
                }
            }
        }
        var result: [String] = []
        var current = ""
        var currentWidth = 0
        var startsLine = true
        for piece in pieces {
            let wordWidth = piece.word.count
            if !startsLine, currentWidth + piece.spaces + wordWidth > width {
                result.append(current)
                current = String(repeating: " ", count: hang)
                currentWidth = hang
                startsLine = true
            }
            let spaces = startsLine && !result.isEmpty ? 0 : piece.spaces
            current += String(repeating: " ", count: spaces) + piece.word
            currentWidth += spaces + wordWidth
            startsLine = false
        }
        result.append(current)
        return result
    }

    struct Line {
        var text: Substring
        /// Leading spaces.
        var indent: Int
        /// Columns (characters; the help texts hold no wide characters).
        var width: Int

        init(_ text: Substring) {
            self.text = text
            indent = text.prefix { $0 == " " }.count
            width = text.count
        }

        var isBlank: Bool { indent == width }

        /// ArgumentParser's `OPTIONS:`; also a heading of the author's own in capitals.
        var isSectionHeading: Bool {
            text.count > 1 && text.last == ":" && text.dropLast().allSatisfy { $0.isUppercase }
        }

        /// `USAGE: ` or `OVERVIEW: ` at the start: its width, where the paragraph's later lines begin.
        var labelPrefixWidth: Int? {
            guard let colon = text.firstIndex(of: ":"), text[text.index(after: colon)...].first == " " else { return nil }
            let label = text[..<colon]
            guard !label.isEmpty, label.allSatisfy({ $0.isUppercase }) else { return nil }
            return label.count + 2
        }

        /// The column after the first run of two or more spaces past the indent: where a
        /// table row's description begins.
        var columnAfterGap: Int? {
            var column = indent
            var spaces = 0
            for character in text.dropFirst(indent) {
                if character == " " {
                    spaces += 1
                } else {
                    if spaces >= 2 { return column }
                    spaces = 0
                }
                column += 1
            }
            return nil
        }
    }
}
