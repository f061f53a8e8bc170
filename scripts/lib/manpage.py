"""A man page (roff) for one of our programs, from what its own --help knows: the
command tree swift-argument-parser prints with --experimental-dump-help (abstracts,
discussions, options with their value names and defaults, subcommands).

    manpage.py PROGRAM [--version V] [--date YYYY-MM-DD] > PROGRAM.1

Used by scripts/package; the page says nothing --help does not.
"""
import argparse
import json
import os
import subprocess
import sys


def escape(text):
    """Roff-safe text: backslashes and hyphens escaped, no line starting with a control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line) if line.startswith((".", "'")) else line for line in text.split("\n"))


def flag_names(argument):
    names = []
    for name in argument.get("names", []):
        names.append(("-" if name["kind"] == "short" else "--") + name["name"])
    return names


def usage(command, path):
    parts = [f"\\fB{escape(' '.join(path))}\\fR"]
    for argument in command.get("arguments", []):
        if not argument.get("shouldDisplay", True) or argument.get("valueName") in ("help", "version"):
            continue
        value = argument.get("valueName", "")
        if argument["kind"] == "positional":
            text = f"\\fI{escape(value)}\\fR"
        else:
            name = argument.get("preferredName") or argument["names"][0]
            text = "\\fB" + escape(("-" if name["kind"] == "short" else "--") + name["name"]) + "\\fR"
            if argument["kind"] == "option":
                text += f" \\fI{escape(value)}\\fR"
        if argument.get("isRepeating"):
            text += " ..."
        parts.append(f"[{text}]" if argument.get("isOptional") else text)
    if command.get("subcommands"):
        parts.append("\\fISUBCOMMAND\\fR")
    return " ".join(parts)


def options(command):
    lines = []
    for argument in command.get("arguments", []):
        if not argument.get("shouldDisplay", True):
            continue
        if argument["kind"] == "positional":
            head = f"\\fI{escape(argument.get('valueName', ''))}\\fR"
        else:
            head = ", ".join(f"\\fB{escape(n)}\\fR" for n in flag_names(argument))
            if argument["kind"] == "option":
                head += f" \\fI{escape(argument.get('valueName', ''))}\\fR"
        text = argument.get("abstract", "")
        if argument.get("discussion"):
            text += " " + argument["discussion"]
        if "defaultValue" in argument:
            text += f" (default: {argument['defaultValue']})"
        lines += [".TP", head, escape(text)]
    return lines


def section(command, path, heading):
    """The description and options of a command, then its subcommands as subsections."""
    lines = []
    if heading:
        lines += [f'.SS "{escape(" ".join(path))}"', escape(command.get("abstract", "")), ".PP", usage(command, path)]
    if command.get("discussion"):
        lines += [".PP", ".nf", escape(command["discussion"]), ".fi"]
    shown = [a for a in command.get("arguments", []) if a.get("shouldDisplay", True)]
    if shown:
        if not heading:
            lines.append(".SH OPTIONS")
        else:
            lines += [".PP", "Options:"]
        lines += options(command)
    subcommands = [c for c in command.get("subcommands", []) if c.get("shouldDisplay", True)
                   and c["commandName"] != "help"]
    if subcommands and not heading:
        lines.append(".SH COMMANDS")
    for sub in subcommands:
        lines += section(sub, path + [sub["commandName"]], True)
    return lines


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("program")
    parser.add_argument("--version", default="")
    parser.add_argument("--date", default="")
    args = parser.parse_args()
    dump = subprocess.run([args.program, "--experimental-dump-help"], capture_output=True, check=True, text=True)
    command = json.loads(dump.stdout)["command"]
    name = command.get("commandName") or os.path.basename(args.program)
    out = [
        f'.TH "{name.upper()}" "1" "{args.date}" "BeaconBridge {args.version}" "BeaconBridge"',
        ".SH NAME",
        f"{escape(name)} \\- {escape(command.get('abstract', ''))}",
        ".SH SYNOPSIS",
        usage(command, [name]),
        ".SH DESCRIPTION",
        escape(command.get("abstract", "")),
    ]
    out += section(command, [name], False)
    others = [p for p in ("beacon-gateway", "beacon-brain", "beaconctl", "beacon-web") if p != name]
    out += [".SH SEE ALSO", ", ".join(f"\\fB{escape(p)}\\fR(1)" for p in others) + ", \\fBmosquitto_sub\\fR(1)",
            ".PP", "/usr/share/doc/beaconbridge/ and /etc/beaconbridge/fleet.json."]
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
