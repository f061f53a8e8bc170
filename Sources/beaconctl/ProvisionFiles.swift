import ArgumentParser
import BeaconKit
import Contract
import CommandLineSupport
import Config
import SystemCalls

#if canImport(Glibc)
import Glibc
#endif

/// Issues certificates signed by the fleet's CA, keeping those that exist.
struct CertificateSigner {
    let tool: Tool
    let openssl: String
    let ca: String
    let caKey: String
    let serial: String
    let work: String
    let days: Int

    /// A server certificate for `names` (DNS names or IP addresses) in `certificate`, its key
    /// in `key` (mode 0600); nothing when both exist, unless `renew`.
    func issue(certificate: String, key: String, names: [String], renew: Bool) async throws {
        guard renew || !FileSystem.exists(certificate) || !FileSystem.exists(key) else { return }
        let request = work + "/server.csr"
        try await tool.run(openssl, ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                                     "-keyout", key, "-out", request, "-subj", "/CN=\(names[0])"], "openssl-key")
        chmod(key, 0o600)
        let alternatives = names.map { Provision.isAddress($0) ? "IP:\($0)" : "DNS:\($0)" }.joined(separator: ",")
        let extensions = work + "/server.ext"
        try FileSystem.write(extensions, Array("""
            subjectAltName=\(alternatives)
            extendedKeyUsage=serverAuth
            keyUsage=critical,digitalSignature,keyEncipherment
            basicConstraints=critical,CA:FALSE

            """.utf8))
        try await tool.run(openssl, ["x509", "-req", "-in", request, "-CA", ca, "-CAkey", caKey,
                                     "-CAcreateserial", "-CAserial", serial, "-out", certificate,
                                     "-days", String(days), "-sha256", "-extfile", extensions], "openssl-sign")
    }
}

/// The layout of `beaconctl provision`'s output directory.
struct ProvisionFiles {
    let root: String
    var ca: String { root + "/ca" }
    var broker: String { root + "/broker" }
    var credentials: String { root + "/credentials" }
    var clients: String { root + "/clients" }
    var web: String { root + "/web" }
    var work: String { root + "/.work" }

    func credential(_ user: String) -> String { credentials + "/\(user).password" }

    func makeDirectories() throws {
        do {
            for directory in [root, ca, broker, credentials, clients, web, work] {
                try FileSystem.makeDirectories(directory, mode: 0o700)
            }
        } catch {
            throw CommandFailure("cannot create \(root): \(error)", status: .failure)
        }
    }

    /// The secret in `path` (its first line), made of `bytes` random bytes when missing.
    func secret(_ path: String, bytes: Int) throws -> String {
        if FileSystem.exists(path) {
            let text = try FileSystem.readText(path)
            let line = String(text.split(separator: "\n").first ?? "")
            if !line.isEmpty { return line }
        }
        // Hex: no character a shell, a URL or Mosquitto's password file treats specially.
        var generator = SystemRandomNumberGenerator()
        let value = (0..<bytes).map { _ in
            let byte = UInt8.random(in: 0...255, using: &generator)
            return (byte < 16 ? "0" : "") + String(byte, radix: 16)
        }.joined()
        try writePrivate(path, value + "\n")
        return value
    }

    func writePrivate(_ path: String, _ text: String, mode: UInt32 = 0o600) throws {
        do {
            try FileSystem.write(path, Array(text.utf8), mode: mode)
            chmod(path, mode_t(mode))
        } catch {
            throw CommandFailure("cannot write \(path): \(error)", status: .failure)
        }
    }

    /// The lines of `passwordFile` whose users provisioning does not know and never made a
    /// credential for: users added by hand, kept when the file is written again.
    func handAddedUsers(in passwordFile: String, provisioned: Set<String>) -> [String] {
        guard let text = try? FileSystem.readText(passwordFile) else { return [] }
        return text.split(separator: "\n").map(String.init).filter { line in
            guard let colon = line.firstIndex(of: ":"), !line.hasPrefix("#") else { return false }
            let user = String(line[..<colon])
            return !provisioned.contains(user) && !FileSystem.exists(credential(user))
        }
    }

    /// `broker/local.acl`, the operator's own ACL lines (hand-added users), for the end of
    /// the generated ACL; made with an explanation when missing. Its first rule must follow a
    /// `user` (or be a `pattern`): otherwise it would extend the generated file's last user.
    func localACL() throws -> String {
        let path = broker + "/local.acl"
        if !FileSystem.exists(path) {
            try writePrivate(path, """
                # Your own ACL lines, appended to beaconbridge.acl by every `beaconctl provision`
                # (which writes beaconbridge.acl afresh). Begin with a user line, e.g.:
                #   user carla
                #   topic read beacons/+/+/ad

                """, mode: 0o644)
            return ""
        }
        let text = try FileSystem.readText(path)
        let rules = text.split(separator: "\n").map { String($0.trimmingBlanks) }.filter { !$0.isEmpty && !$0.hasPrefix("#") }
        guard let first = rules.first else { return "" }
        guard first.hasPrefix("user ") || first.hasPrefix("pattern ") else {
            throw CommandFailure("\(path): its first rule (\"\(first)\") must follow a \"user NAME\" line, "
                                 + "else it would add to the generated ACL's last user")
        }
        return "\n# From \(path) (kept by beaconctl provision):\n" + text + (text.hasSuffix("\n") ? "" : "\n")
    }

    /// Mosquitto reads its password file and ACL as its own user (`mosquitto`), after
    /// dropping root. When it reads `broker/` in place (`brokerDirectory` is this
    /// directory's `broker/`), that user must be able to: as root, `broker/` becomes group
    /// `mosquitto` (the secrets in it 0640) and the directories above it in `root` are
    /// opened to that group for passing through only. Returns what was done or what the
    /// operator must do; `nil` when the broker's files are installed elsewhere.
    func shareWithBroker(brokerDirectory: String) -> String? {
        guard let here = realpath(broker, nil) else { return nil }
        defer { free(here) }
        guard let there = realpath(brokerDirectory, nil) else { return nil }
        defer { free(there) }
        guard strcmp(here, there) == 0 else { return nil }
        guard let group = getgrnam("mosquitto") else { return nil }
        let gid = group.pointee.gr_gid
        guard geteuid() == 0 else {
            return "note: the broker reads \(broker) in place; Mosquitto reads its password file and ACL as user "
                + "mosquitto, which cannot read this private directory: run provisioning as root (it then shares "
                + "broker/ with group mosquitto) or install broker/ as README.txt says"
        }
        var failure: SystemError?
        func share(_ path: String, _ mode: mode_t) {
            if chown(path, 0, gid) != 0 { failure = SystemError(call: "chown", errno: errno, subject: path) }
            if chmod(path, mode) != 0 { failure = SystemError(call: "chmod", errno: errno, subject: path) }
        }
        share(root, 0o710)
        share(broker, 0o750)
        for name in ["passwd", "broker.key"] { share(broker + "/" + name, 0o640) }
        for name in ["beaconbridge.acl", "beaconbridge.conf", "ca.crt", "broker.crt", "local.acl"] {
            share(broker + "/" + name, 0o644)
        }
        if let failure { return "note: could not share \(broker) with group mosquitto: \(failure)" }
        // The directories above `root` must let the broker's user pass too.
        var closed: [String] = []
        var parent = root
        while let slash = parent.lastIndex(of: "/"), slash != parent.startIndex {
            parent = String(parent[..<slash])
            var info = stat()
            if stat(parent, &info) == 0, info.st_mode & 0o001 == 0, !(info.st_gid == gid && info.st_mode & 0o010 != 0) {
                closed.append(parent)
            }
        }
        if !closed.isEmpty {
            return "note: Mosquitto (user mosquitto) cannot pass through \(closed.joined(separator: ", ")) to reach "
                + "\(broker): open it (chmod o+x) or install broker/ as README.txt says"
        }
        return "shared \(broker) with group mosquitto (passwd and broker.key 0640): the broker reads it in place"
    }

    /// The scratch directory: the certificate request and the tools' output.
    func removeWork() {
        for name in ["server.csr", "server.ext", "passwd"] + Tool.names.flatMap({ [$0 + ".out", $0 + ".err"] }) {
            unlink(work + "/" + name)
        }
        rmdir(work)
    }
}

/// Runs the tools provisioning needs, their output kept for the error message.
struct Tool {
    let directory: String
    static let names = ["mosquitto_passwd", "openssl-ca", "openssl-key", "openssl-sign"]

    func run(_ program: String, _ arguments: [String], _ name: String) async throws {
        let process = try RunningProgram(program, arguments, name: name, in: directory)
        let status = await process.wait(timeout: 120)
        guard status == 0 else {
            throw CommandFailure("\(program) \(arguments.first ?? "") failed (status \(status.map(String.init) ?? "none")): "
                                 + process.errors.trimmingBlanks, status: .failure)
        }
    }
}
