#!/usr/bin/env bash
# The documentation keeps up with the code: every flag each command's --help lists is in
# docs/cli.md, every built-in model in its Models table, every experiment file in docs/sweep.md;
# no help line is cut short (a scheme flag's help once lost its end to a fixed buffer), a
# one-letter flag is written as its usage line writes it (-n, not --n); the links of
# README.md and docs/cli.md lead to files and headings that exist.
. "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CLI=$ROOT/docs/cli.md

# 1. every flag of every command's --help, as a whole word of docs/cli.md
for cmd in train run sim "sim calibrate" sweep eval sample info bench tune diff; do
    # shellcheck disable=SC2086
    "$DTRAIN" $cmd --help >"$T/help" 2>&1 || { check "dtrain $cmd --help" 1 "exit $?"; continue; }
    missing=""
    for fl in $(grep -oE '^  --?[a-z0-9][a-z0-9-]*' "$T/help" | tr -d ' '); do
        grep -qE -- "(^|[^a-z0-9-])$fl([^a-z0-9-]|\$)" "$CLI" || missing="$missing $fl"
    done
    n=$(grep -cE '^  --?[a-z0-9]' "$T/help")
    [ -z "$missing" ] && [ "$n" -gt 0 ]
    check "dtrain $cmd: its $n flags in docs/cli.md" $? "${missing:+missing:$missing}"
done

# 2. one-letter flags as the usage writes them; no help cut short
"$DTRAIN" run --help >"$T/run" 2>&1
grep -q '^  -n N ' "$T/run" && ! grep -q -- '--n N' "$T/run"
check "dtrain run --help: -n N, as its usage line" $? "$(grep -E -- '-n N' "$T/run" | head -2 | tr '\n' '|')"
"$DTRAIN" train --help >"$T/train" 2>&1
grep -q -- '^  --mix S .*auto: consensus without --sync \[auto\]$' "$T/train"
check "dtrain train --help: --mix's help whole, with its default" $? "...$(grep -- '^  --mix' "$T/train" | tail -c 60)"

# ... and a missing data folder says every way to give one
for data in mnist kjv; do
    model=mlp; [ $data = kjv ] && model=gpt-tiny
    "$DTRAIN" train --model $model --data $data --data-dir "$T/nothing-here" --epochs 1 --no-save >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "scripts/get-data" "$T/err" && grep -q -- "--data-dir DIR" "$T/err" &&
        grep -q "DTRAIN_DATA" "$T/err" && grep -q "$T/nothing-here" "$T/err"
    check "--data $data, no files: one line naming the folder, scripts/get-data, --data-dir and DTRAIN_DATA" $? "exit $rc: $(head -c 300 "$T/err")"
done

# 3. every built-in model in the Models table
missing=""
for m in $("$DTRAIN" info --list); do grep -q "^| \`$m\` |" "$CLI" || missing="$missing $m"; done
n=$("$DTRAIN" info --list | wc -l)
[ -z "$missing" ] && [ "$n" -ge 9 ]
check "docs/cli.md: the $n built-in models in the Models table" $? "${missing:+missing:$missing}"

# 4. every experiment file named in docs/sweep.md
missing=""
for f in "$ROOT"/experiments/*.ini; do
    b=$(basename "$f")
    grep -q "experiments/$b\|\`$b\`" "$ROOT/docs/sweep.md" || missing="$missing $b"
done
n=$(ls "$ROOT"/experiments/*.ini | wc -l)
[ -z "$missing" ]
check "docs/sweep.md: every experiment file ($n)" $? "${missing:+missing:$missing}"

# 5. links: the files exist, and a #heading is one of the file's headings (GitHub's anchors)
/usr/bin/python3 - "$ROOT" README.md docs/cli.md docs/sweep.md docs/reports.md >"$T/links" 2>&1 <<'PY'
import os, re, sys
root = sys.argv[1]
def anchors(path):
    out = set()
    for line in open(path, encoding="utf-8"):
        m = re.match(r"#+ (.*)", line)
        if m:
            a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(a)
    return out
bad = []
for rel in sys.argv[2:]:
    path = os.path.join(root, rel)
    if not os.path.exists(path):
        continue
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        f, _, frag = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), f)) if f else path
        if not os.path.exists(dest):
            bad.append(f"{rel}: {target} (no such file)")
        elif frag and dest.endswith(".md") and frag not in anchors(dest):
            bad.append(f"{rel}: {target} (no such heading)")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
check "README.md, docs/cli.md, sweep.md, reports.md: every link's file and heading exist" $? "$(head -5 "$T/links" | tr '\n' '|')"
finish
