#!/usr/bin/env python3
"""quickstart_blocks.py: docs/quickstart.md's marked blocks, for the two tests
that run them (firmware-tests/quickstart.sh against the build tree,
systemd/install_real_test.sh on a real Debian 12 under systemd).

  quickstart_blocks.py split DOC OUT_DIR [MARKER]
      Splits DOC into OUT_DIR/NN.kind (run|machine), NN.sh (the block),
      NN.expect (the outputs the doc shows after it) and NN.title (its
      section and line). A block is a fence after `<!-- quickstart -->`
      (```sh, run on the appliance), `<!-- quickstart: machine -->` (```sh,
      happens on the machine) or `<!-- quickstart: output -->` (```text,
      what the run block before it prints). Exit 1 on a malformed doc.
      MARKER (default quickstart) names another set of blocks the same
      way: `<!-- upgrade -->` for docs/operations.md's upgrade runbook
      (script/upgrade-test).

  quickstart_blocks.py expect WANT GOT
      Every line of WANT matches a line of GOT, in order (others may come
      between): `<...>` alone is skipped, `<WORD>` inside a line is any
      text, runs of spaces count as one. Prints the first line that does
      not match and exits 1.

  quickstart_blocks.py tools OUT_DIR
      Every program the run blocks of OUT_DIR call is on a fresh Debian 12
      (a debootstrap root with sudo), comes with the packages, or an earlier
      block's `apt install` names it (issue 32: step 6's curl was none of
      these). Prints the others and exits 1.
"""
import glob
import re
import sys


def split(doc, out, marker="quickstart"):
    lines = open(doc).read().split("\n")
    steps, section, i = [], "", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        m = re.fullmatch(r"<!-- " + re.escape(marker) + r"(?:: (output|machine))? -->", line.strip())
        if not m:
            i += 1
            continue
        kind = m.group(1) or "run"
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        fence = re.fullmatch(r"```(\w+)", lines[j].strip()) if j < len(lines) else None
        if not fence:
            sys.exit(f"{doc}:{i+1}: a {marker} marker must be followed by a fenced block")
        want = "text" if kind == "output" else "sh"
        if fence.group(1) != want:
            sys.exit(f"{doc}:{j+1}: a '{kind}' block is ```{want}, not ```{fence.group(1)}")
        k = j + 1
        while k < len(lines) and lines[k].strip() != "```":
            k += 1
        body = "\n".join(lines[j + 1:k]) + "\n"
        if kind == "output":
            if not steps or steps[-1]["kind"] != "run":
                sys.exit(f"{doc}:{i+1}: an output block must follow a quickstart block")
            steps[-1]["expect"] += body
        else:
            steps.append({"kind": kind, "body": body, "expect": "", "title": section, "line": j + 2})
        i = k + 1
    if not steps:
        sys.exit(f"{doc}: no {marker} blocks")
    for n, s in enumerate(steps, 1):
        base = f"{out}/{n:02d}"
        open(base + ".kind", "w").write(s["kind"])
        open(base + ".sh", "w").write(s["body"])
        open(base + ".expect", "w").write(s["expect"])
        open(base + ".title", "w").write(f"{s['title']} (line {s['line']})")


def expect(want_file, got_file):
    want = [" ".join(l.split()) for l in open(want_file) if l.strip()]
    got = [" ".join(l.split()) for l in open(got_file, errors="replace")]
    at = 0
    for w in want:
        if w == "<...>":
            continue
        rx = re.compile("".join(".+" if re.fullmatch(r"<[^<>]+>", p) else re.escape(p)
                                for p in re.split(r"(<[^<>]+>)", w) if p))
        while at < len(got) and not rx.fullmatch(got[at]):
            at += 1
        if at == len(got):
            print(f"not in the output (in order): {w}")
            sys.exit(1)
        at += 1


def tools(out):
    fresh = set("sudo apt apt-get cat tee cp mv rm mkdir chmod chown ls echo printf test grep sed "
                "getent usermod systemctl journalctl sha256sum head tail".split())
    packaged = {"rackgatectl", "rackgated"}
    installed, bad = set(), []
    for kind_file in sorted(glob.glob(out + "/*.kind")):
        if open(kind_file).read() != "run":
            continue
        heredoc, continued = None, False
        for line in open(kind_file[:-5] + ".sh"):
            line = line.strip()
            if heredoc:
                heredoc = None if line == heredoc else heredoc
                continue
            # A continuation line holds arguments, not a command.
            was_continued, continued = continued, line.endswith("\\")
            if was_continued:
                continue
            if m := re.search(r"<<-?\s*'?(\w+)'?", line):
                heredoc = m.group(1)
            for part in re.split(r"\|\||&&|\||;", line):
                words = part.split()
                while words and (words[0] == "sudo" or words[0].startswith("-") or "=" in words[0]):
                    words = words[2:] if words[0] == "-u" else words[1:]
                if not words or words[0].startswith(("#", "\\", '"', "{", "}", "]", "<", ">")):
                    continue
                cmd = words[0]
                if cmd in ("apt", "apt-get") and len(words) > 1 and words[1] == "install":
                    installed.update(w for w in words[2:] if not w.startswith(("-", ".", "/")))
                if cmd not in fresh | packaged | installed and re.fullmatch(r"[a-z][a-z0-9._-]*", cmd):
                    bad.append(f"{kind_file[:-5]}.sh: {cmd}")
    print("\n".join(bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    if len(sys.argv) in (4, 5) and sys.argv[1] == "split":
        split(*sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "expect":
        expect(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "tools":
        tools(sys.argv[2])
    else:
        sys.exit(__doc__)
