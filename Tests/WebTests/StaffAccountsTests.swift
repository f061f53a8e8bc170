import Testing
import WebServer

@Suite("the staff accounts file")
struct StaffAccountsTests {
    // bcrypt of "secret" at cost 4 (made by `beacon-web hash-password --cost 4`).
    static let hash = "$2b$04$z7APEpvSUGfzVjy1Ne17PuzxdfPWK0KhqJKzVt1aPpe6wtFTvSvcm"

    @Test("name:hash lines, comments and blank lines; the right password only")
    func verify() async throws {
        let accounts = try StaffAccounts(parsing: "# the shop\n\nana:\(Self.hash)\r\n")
        #expect(accounts.hashes.keys.sorted() == ["ana"])
        #expect(await accounts.verify(name: "ana", password: "secret"))
        #expect(!(await accounts.verify(name: "ana", password: "Secret")))
        #expect(!(await accounts.verify(name: "ben", password: "secret")))
        #expect(!(await accounts.verify(name: "", password: "")))
    }

    @Test("a bad file is refused with the line and the reason", arguments: [
        ("ana secret", 1, "expected name:hash"),
        ("ana:secret", 1, "\"ana\": not a bcrypt hash ($2a$/$2b$/$2y$…); make one with beacon-web hash-password"),
        (":\(StaffAccountsTests.hash)", 1, "the name is empty"),
        ("ana:\(StaffAccountsTests.hash)\nana:\(StaffAccountsTests.hash)", 2, "\"ana\" is listed twice"),
        ("# nobody\n", 0, "no accounts: nobody could log in"),
    ])
    func refused(text: String, line: Int, reason: String) {
        #expect(throws: StaffAccounts.FileError(line: line, reason: reason)) { try StaffAccounts(parsing: text) }
    }
}
