#!/usr/bin/env bash
# dtrain sim calibrate and --calibration (docs/simulation.md, "Calibrating on your cluster"):
# two ranks write a calibration file (here both on this machine; tests/cli_hosts.sh measures
# two namespace hosts' 100 Mbit/s link); dtrain sim takes the file's links, speed and
# corrections, and the corrections change the simulated time as they say (a bandwidth factor
# of 0.1 makes a 2-host allreduce's messages 10x slower; an MPI that moves a sum only inside
# its calls exposes allreduce's buckets; the network's CPU a byte lengthens the time by the
# bytes sent while computing); bad files and flags are one line naming file:line or the flag,
# exit 2, nothing written.
. "$(dirname "$0")/lib.sh"
require_mnist
require_sim

out=$(timeout -k 5 300 "$DTRAIN" sim calibrate --out "$T/cal.ini" --reps 3 --steps 5 --longest 0.01 2>&1)
check "calibrate on this machine" $? "$(echo "$out" | tail -2)"
/usr/bin/python3 - "$T/cal.ini" >"$T/verdict" 2>&1 <<'EOF2'
import configparser, sys
c = configparser.ConfigParser(inline_comment_prefixes=(";",))
c.read(sys.argv[1])
sizes = [int(k) for k in c["sizes"]]
assert sizes[0] == 0 and sizes == sorted(sizes) and len(sizes) >= 5, sizes
for k, v in c["sizes"].items():
    t, f, isend, recv = map(float, v.split())
    assert t > 0 and f > 0 and isend >= 0 and recv >= 0, (k, v)
assert float(c["link"]["latency"]) > 0 and float(c["link"]["rate"]) > 1e6, dict(c["link"])
assert c["host"]["model"] == "cnn1" and float(c["host"]["speed"]) > 1e8, dict(c["host"])
p = c["progress"]
assert int(p["bucket"]) == 1 << 20 and float(p["hidden"]) <= 1 and float(p["bytes_per_call"]) >= 0, dict(p)
assert (float(p["bytes_per_call"]) == 0) == (float(p["hidden"]) >= 0.9), dict(p)
assert 0 <= float(p.get("cpu_per_byte", 0)) <= 1e-3, dict(p)
print(f"{len(sizes)} sizes to {sizes[-1]} bytes, rate {float(c['link']['rate']):.3g} bit/s, speed {float(c['host']['speed']):.3g}")
EOF2
check "the file: sizes from 0 ascending, times, factors, latency, rate, cnn1's speed, the MPI's progress" $? "$(cat "$T/verdict")"

# the corrections at work: the same file with every bandwidth factor 1, then 0.1, at 100 Mbit/s
# and 5 us (--link and --latency over the file's): a 2-host allreduce of cnn1's 153.6 kB
# (bucket-kb 0: one exchange a step, 12.3 ms at the full rate) communicates ~10x longer
R=(-n 2 --algo allreduce --bucket-kb 0 --model cnn1 --data mnist --test-limit 200 --max-steps 30 --seed 1 --quiet
   --no-save --compute modelled --link 100Mbps --latency 5us)
# (what this machine's loopback gave for both ways at once and for progress left out: the
# checks below start from the links alone, and add them back as they test them)
awk '/^\[progress\]/ { skip = 1; next } /^\[/ { skip = 0 } !skip && !/^duplex/' "$T/cal.ini" >"$T/links.ini"
awk -F' = ' 'BEGIN { s = 0 } /^\[/ { s = ($0 == "[sizes]") } s && $1 ~ /^[0-9]+$/ { split($2, v, " ");
    printf "%s = %s 1 0 0\n", $1, v[1]; next } { print }' "$T/links.ini" >"$T/one.ini"
awk -F' = ' 'BEGIN { s = 0 } /^\[/ { s = ($0 == "[sizes]") } s && $1 ~ /^[0-9]+$/ { split($2, v, " ");
    printf "%s = %s 0.1 0 0\n", $1, v[1]; next } { print }' "$T/links.ini" >"$T/tenth.ini"
"$DTRAIN" sim "${R[@]}" --calibration "$T/one.ini" --log "$T/one.jsonl" >/dev/null 2>&1
"$DTRAIN" sim "${R[@]}" --calibration "$T/tenth.ini" --log "$T/tenth.jsonl" >/dev/null 2>&1
a=$(per_rank_sum "$T/one.jsonl" comm_s 0 1) b=$(per_rank_sum "$T/tenth.jsonl" comm_s 0 1)
r=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.2f", b / a }')
within "bandwidth factor 0.1 against 1: communication time ratio" "$r" 8 11
# MPI_Isend's time: only the part its transfer does not explain is charged (SMPI charges
# smpi/os before the transfer; a real Isend over 1,500-byte frames returns when the bytes have
# nearly crossed). A file whose Isend lasts exactly its message's transfer at 100 Mbit/s
# simulates as the one with none; one 5 ms longer than that costs the 5 ms a message.
for kind in spans:0 slow:0.005; do
    awk -F' = ' -v extra="${kind#*:}" 'BEGIN { s = 0 } /^\[/ { s = ($0 == "[sizes]") }
        s && $1 ~ /^[0-9]+$/ { x = 8 * $1 / 1e8; printf "%s = %.9g 1 %.9g 0\n", $1, 1e-5 + x, x + extra; next }
        { print }' "$T/links.ini" >"$T/${kind%:*}.ini"
    "$DTRAIN" sim "${R[@]}" --calibration "$T/${kind%:*}.ini" --log "$T/${kind%:*}.jsonl" >/dev/null 2>&1
done
c=$(per_rank_sum "$T/spans.jsonl" comm_s 0 1) d=$(per_rank_sum "$T/slow.jsonl" comm_s 0 1)
r=$(awk -v a="$a" -v c="$c" 'BEGIN { if (a > 0) printf "%.3f", c / a }')
within "an Isend as long as its transfer against none: communication time ratio" "$r" 0.9 1.15
r=$(awk -v a="$a" -v d="$d" 'BEGIN { if (a > 0) printf "%.3f", d / a }')
within "an Isend 5 ms longer than its transfer against none: communication time ratio" "$r" 1.25 4
sp=$(log_query "$T/one.jsonl" 'of("config")[0]["sim"]["speed_flops"]')
holds "$sp" '==' "$(awk -F' = ' '$1 == "speed" { print $2 }' "$T/cal.ini")"
check "--compute modelled without --speed: the file's speed for its model" $? "$sp"

# MPI's progress ([progress]): an MPI that moves a non-blocking sum only inside its calls, 2 kB
# a call, against one that moves it in the background (the file without [progress], and with
# bytes_per_call 0): allreduce's buckets (16 kB, started during backward) no longer cross while
# backward computes, so its communication is longer; what is computed and sent is the same.
# Hosts of 2 Gflop/s: a backward pass long enough for cnn1's buckets to cross during it
cp "$T/one.ini" "$T/bg.ini"
printf '\n[progress]\nbucket = 1048576\nhidden = 0.95\nbytes_per_call = 0\n' | cat "$T/bg.ini" - >"$T/bg0.ini"
printf '\n[progress]\nbucket = 1048576\nhidden = 0.004\nbytes_per_call = 2048\n' | cat "$T/bg.ini" - >"$T/calls.ini"
B=("${R[@]}" --bucket-kb 16 --speed 2Gf)
for f in bg bg0 calls; do
    "$DTRAIN" sim "${B[@]}" --calibration "$T/$f.ini" --log "$T/p-$f.jsonl" >/dev/null 2>&1
done
bg=$(per_rank_sum "$T/p-bg.jsonl" comm_s 0 1) bg0=$(per_rank_sum "$T/p-bg0.jsonl" comm_s 0 1)
calls=$(per_rank_sum "$T/p-calls.jsonl" comm_s 0 1)
holds "$bg0" '==' "$bg"
check "[progress] bytes_per_call 0 is the background's communication time" $? "$bg0 against $bg"
r=$(awk -v a="$bg" -v b="$calls" 'BEGIN { if (a > 0) printf "%.2f", b / a }')
within "2 kB a call against the background: communication time ratio" "$r" 1.3 100
# same_outcome LOG OTHER WHAT: the two runs computed and sent the same
same_outcome() {
    for k in test_loss mb_sent steps; do
        holds "$(log_query "$1" "of('summary')[0]['$k']")" '==' "$(log_query "$2" "of('summary')[0]['$k']")"
        check "$3 changes the time, not the $k" $? "$k"
    done
}
same_outcome "$T/p-calls.jsonl" "$T/p-bg.jsonl" "[progress]"
pb=$(log_query "$T/p-calls.jsonl" 'of("config")[0]["sim"]["progress_bytes_per_call"]')
holds "$pb" '==' 2048
check "the log's config says the bytes a call moves" $? "$pb"

# the network's CPU ([progress] cpu_per_byte): each byte that arrives while a rank computes
# (between its calls into MPI) keeps its host busy 10 ns more; on the background file (a
# sum's level posted at once) most of a bucket arrives while backward goes on, so the extra
# time is between a share of all bytes x 10 ns and all of it; what is computed and sent is the
# same
printf 'cpu_per_byte = 1e-8\n' | cat "$T/bg0.ini" - >"$T/cost.ini"
"$DTRAIN" sim "${B[@]}" --calibration "$T/cost.ini" --log "$T/p-cost.jsonl" >/dev/null 2>&1
cost=$(per_rank_sum "$T/p-cost.jsonl" comm_s 0 1) sent=$(per_rank_sum "$T/p-cost.jsonl" bytes_sent 0 1)
r=$(awk -v a="$bg0" -v b="$cost" -v n="$sent" 'BEGIN { if (n > 0) printf "%.3f", (b - a) / (n * 1e-8) }')
within "10 ns a byte received while computing: the extra time over the bytes' cost" "$r" 0.4 1.3
same_outcome "$T/p-cost.jsonl" "$T/p-bg0.jsonl" "[progress] cpu_per_byte"
pc=$(log_query "$T/p-cost.jsonl" 'of("config")[0]["sim"]["cpu_s_per_byte"]')
holds "$pc" '==' 1e-08
check "the log's config says the network's CPU a byte" $? "$pc"

# both ways at once ([link] duplex_rate, with --duplex-limit): hosts whose two directions share
# their link, each way at half the rate (dtrain sim gives each host a limiter link both
# directions cross, SimGrid's limiter_link): a 2-host allreduce's exchanges (both ways at once)
# take twice as long; without --duplex-limit the file's duplex_rate changes nothing
rate=$(awk -F' = ' '$1 == "rate" { print $2 }' "$T/one.ini")
awk -v r="$rate" '{ print } /^rate = / { printf "duplex = 1\nduplex_rate = %.6g\n", r / 2 }' "$T/one.ini" >"$T/half.ini"
"$DTRAIN" sim "${R[@]}" --calibration "$T/one.ini" --log "$T/d-one.jsonl" >/dev/null 2>&1
"$DTRAIN" sim "${R[@]}" --calibration "$T/half.ini" --duplex-limit --log "$T/d-half.jsonl" >/dev/null 2>&1
grep -q 'in and out together' "$T/d-half.jsonl"
check "the log's cluster says what a host moves in and out together" $? "$(grep -o '[^,"]*in and out together' "$T/d-half.jsonl" | head -1)"
"$DTRAIN" sim "${R[@]}" --calibration "$T/half.ini" --log "$T/d-off.jsonl" >/dev/null 2>&1
a=$(per_rank_sum "$T/d-one.jsonl" comm_s 0 1) b=$(per_rank_sum "$T/d-half.jsonl" comm_s 0 1)
off=$(per_rank_sum "$T/d-off.jsonl" comm_s 0 1)
holds "$off" '==' "$a"
check "without --duplex-limit, the file's duplex_rate changes nothing" $? "$off against $a"
within "allreduce, half the rate each way both ways at once: communication time ratio" \
    "$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.2f", b / a }')" 1.6 2.2

# bad input: one line naming the file (and line) or the flag, exit 2
printf 'not a calibration\n' >"$T/notes.txt"
expect_error "--calibration of another file" "notes.txt:1: not a calibration file" -- \
    "$DTRAIN" sim "${R[@]}" --calibration "$T/notes.txt"
sed 's/^rate = .*/rate = fast/' "$T/cal.ini" >"$T/badrate.ini"
line=$(grep -n '^rate = ' "$T/badrate.ini" | cut -d: -f1)
expect_error "--calibration with a bad rate" "badrate.ini:$line: rate: expected bits/s" -- \
    "$DTRAIN" sim "${R[@]}" --calibration "$T/badrate.ini"
sed 's/^65536 = .*/65536 = 1 2 3/' "$T/cal.ini" >"$T/badsize.ini"
expect_error "--calibration with a short size line" "badsize.ini:" -- "$DTRAIN" sim "${R[@]}" --calibration "$T/badsize.ini"
sed 's/^bytes_per_call = .*/bytes_per_call = -5/' "$T/calls.ini" >"$T/badprog.ini"
line=$(grep -n '^bytes_per_call = ' "$T/badprog.ini" | cut -d: -f1)
expect_error "--calibration with negative bytes a call" "badprog.ini:$line: bytes_per_call: expected bytes >= 0" -- \
    "$DTRAIN" sim "${R[@]}" --calibration "$T/badprog.ini"
sed 's/^cpu_per_byte = .*/cpu_per_byte = 0.5/' "$T/cost.ini" >"$T/badcost.ini"
line=$(grep -n '^cpu_per_byte = ' "$T/badcost.ini" | cut -d: -f1)
expect_error "--calibration with a byte's CPU of half a second" "badcost.ini:$line: cpu_per_byte: expected seconds a byte, 0 to 1e-3" -- \
    "$DTRAIN" sim "${R[@]}" --calibration "$T/badcost.ini"
expect_error "--duplex-limit without --calibration" "--duplex-limit: only with --calibration FILE" -- \
    "$DTRAIN" sim "${R[@]}" --duplex-limit
expect_error "--duplex-limit with a file that did not measure it" "--duplex-limit: --calibration $T/one.ini has no both-ways rate" -- \
    "$DTRAIN" sim "${R[@]}" --calibration "$T/one.ini" --duplex-limit
expect_error "--calibration on another platform" "--calibration $T/cal.ini: with --platform cluster" -- \
    "$DTRAIN" sim -n 2 --algo allreduce --platform datacenter --calibration "$T/cal.ini"
expect_error "--calibration's speed for another model" "its hosts' speed is cnn1's, not --model mlp's" -- \
    "$DTRAIN" sim -n 2 --algo allreduce --model mlp --compute modelled --calibration "$T/cal.ini"
expect_error "--calibration of a missing file" "--calibration $T/none.ini" -- \
    "$DTRAIN" sim "${R[@]}" --calibration "$T/none.ini"
expect_error "calibrate without --out" "--out FILE is needed" -- "$DTRAIN" sim calibrate
expect_error "calibrate over a file that is not one" "--out $T/notes.txt: exists and is not a calibration file" -- \
    "$DTRAIN" sim calibrate --out "$T/notes.txt"
[ "$(cat "$T/notes.txt")" = "not a calibration" ]
check "the file that is not a calibration is left as it was" $? "$(head -c 60 "$T/notes.txt")"
finish
