#!/usr/bin/env python3
"""The house's measures (issue 50), checked on every build: the limits a change must keep.
  - build variants (the simulation, oneDNN) stay in their own files: at most 4 .c files hold a
    preprocessor conditional on DT_SIM or DT_WITH_DNNL;
  - no source file over 460 lines, no function over 100;
  - project includes sorted within each block;
  - out-of-memory spelled once: DT_ERR_NOMEM only in core/alloc and status.c's to-string.
Prints one line per breach and exits 1; prints the measures and exits 0 otherwise."""
import glob, os, re, sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
os.chdir(root)
src = sorted(glob.glob("src/**/*.[ch]", recursive=True))
breaches = []

variant = re.compile(r"^\s*#\s*if.*(DT_SIM|DT_WITH_DNNL)")
variant_files = [p for p in src if p.endswith(".c") and any(variant.match(l) for l in open(p))]
if len(variant_files) > 4:
    breaches.append("%d .c files hold #if DT_SIM/DT_WITH_DNNL (at most 4): %s"
                    % (len(variant_files), " ".join(variant_files)))

longest_file, longest_fn = ("", 0), ("", 0)
for p in src:
    lines = open(p).read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) > longest_file[1]:
        longest_file = (p, len(lines))
    if len(lines) > 460:
        breaches.append("%s: %d lines (at most 460)" % (p, len(lines)))
    depth, head, start, name = 0, "", None, None
    in_comment = False
    for i, raw in enumerate(lines):
        l = raw
        if in_comment:
            if "*/" not in l:
                continue
            l, in_comment = l.split("*/", 1)[1], False
        l = re.sub(r"/\*.*?\*/", "", l)
        if "/*" in l:
            l, in_comment = l.split("/*", 1)[0], True
        l = re.sub(r"//.*", "", re.sub(r"'(\\.|[^'])'", "0", re.sub(r'"(\\.|[^"])*"', '""', l)))
        if l.lstrip().startswith("#"):
            continue
        for ch in l:
            if ch == "{":
                if depth == 0:
                    m = re.search(r"(\w+)\s*\([^{]*$", head)
                    if m and "=" not in head.split("(")[0] and not re.match(r"\s*(typedef|struct|enum|union)\b", head):
                        start, name = i, m.group(1)
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0 and start is not None:
                    n = i - start + 1
                    if n > longest_fn[1]:
                        longest_fn = ("%s:%d %s" % (p, start + 1, name), n)
                    if n > 100:
                        breaches.append("%s:%d: %s is %d lines (at most 100)" % (p, start + 1, name, n))
                    start = None
                if depth == 0:
                    head = ""
            elif ch == ";" and depth == 0:
                head = ""
            elif depth == 0:
                head += ch
        if depth == 0:
            head += " "
    i = 0
    while i < len(lines):
        if lines[i].startswith('#include "'):
            j = i
            while j < len(lines) and lines[j].startswith('#include "'):
                j += 1
            block = lines[i:j]
            if block != sorted(block, key=lambda l: l.split('"')[1]):
                breaches.append("%s:%d: project includes not in order" % (p, i + 1))
            i = j
        else:
            i += 1

nomem = [p for p in src if "DT_ERR_NOMEM" in open(p).read()
         and p not in ("src/core/alloc.c", "src/core/alloc.h", "src/core/status.c")]
if nomem:
    breaches.append("DT_ERR_NOMEM outside core/alloc and status.c: " + " ".join(nomem))

for b in breaches:
    print("house: " + b)
if breaches:
    sys.exit(1)
print("house: %d variant files (%s); longest file %s (%d lines); longest function %s (%d lines)"
      % (len(variant_files), " ".join(variant_files), longest_file[0], longest_file[1],
         longest_fn[0], longest_fn[1]))
