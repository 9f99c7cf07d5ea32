#!/usr/bin/env bash
# scripts/get-data cifar10 against a server on the loopback (DTRAIN_CIFAR10_URL/_MD5 point it
# there): a small crafted archive in the official layout is fetched, its MD5 checked, only its
# six batches unpacked, and dtrain trains on them; a second run has nothing to do. A wrong
# checksum, a download cut short, an unreachable server, an archive without the batches and a
# folder that is in the way each give one line, a non-zero exit, and leave nothing behind.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GET=$ROOT/scripts/get-data
FILES="data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin data_batch_5.bin test_batch.bin"

# the archive: 20 records (a label 0..9, 3,072 pixels) a batch, and one more member that must
# not be unpacked; a second archive without the batches
mkdir -p "$T/src/cifar-10-batches-bin" "$T/www" "$T/other"
for f in $FILES; do
    /usr/bin/python3 -c 'import os, sys; sys.stdout.buffer.write(b"".join(bytes([i % 10]) + os.urandom(3072) for i in range(20)))' \
        >"$T/src/cifar-10-batches-bin/$f"
done
echo "not a batch" >"$T/src/cifar-10-batches-bin/readme.html"
tar czf "$T/www/good.tar.gz" -C "$T/src" cifar-10-batches-bin
echo "x" >"$T/other/file"
tar czf "$T/www/other.tar.gz" -C "$T/other" file
MD5=$(md5sum "$T/www/good.tar.gz" | cut -d' ' -f1)
OTHER_MD5=$(md5sum "$T/www/other.tar.gz" | cut -d' ' -f1)

# the server: files from www/; /cut/NAME promises NAME's length and closes after half of it
cat >"$T/serve.py" <<'EOP'
import http.server, os, sys
root = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        cut = self.path.startswith("/cut/")
        p = os.path.join(root, os.path.basename(self.path))
        if not os.path.isfile(p):
            self.send_error(404)
            return
        body = open(p, "rb").read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2] if cut else body)
        self.wfile.flush()
        if cut:
            self.close_connection = True
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
EOP
/usr/bin/python3 "$T/serve.py" "$T/www" >"$T/port" &
srv=$!
trap 'kill $srv 2>/dev/null; rm -rf "$T" "$DTRAIN_RUN_DIR"' EXIT
for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
PORT=$(cat "$T/port")
URL=http://127.0.0.1:$PORT

# get NAME URL MD5: scripts/get-data cifar10 into $T/NAME; its output in $T/NAME.out, status rc
get() {
    DTRAIN_CIFAR10_URL=$2 DTRAIN_CIFAR10_MD5=$3 "$GET" cifar10 "$T/$1" >"$T/$1.out" 2>&1
    rc=$?
}
# nothing left in DIR: no batches, no temporary folder
empty() { [ -z "$(ls -A "$T/$1" 2>/dev/null)" ]; }
one_line() { [ "$(wc -l <"$T/$1.out")" = 1 ]; }

mkdir -p "$T/ok"
get ok "$URL/good.tar.gz" "$MD5"
same=0
for f in $FILES; do cmp -s "$T/src/cifar-10-batches-bin/$f" "$T/ok/cifar10/cifar-10-batches-bin/$f" || same=1; done
[ "$rc" = 0 ] && [ "$same" = 0 ] && [ ! -e "$T/ok/cifar10/cifar-10-batches-bin/readme.html" ] &&
    [ -z "$(find "$T/ok" -name '.get-data*')" ]
check "the right checksum: the six batches, byte for byte, nothing else, no temporary folder" $? "exit $rc: $(cat "$T/ok.out")"
timeout -k 5 120 "$DTRAIN" train --data cifar10 --data-dir "$T/ok/cifar10" --model alexnet-cifar --batch 10 \
    --max-steps 2 --eval-every 0 --no-save --quiet >"$T/train.out" 2>&1
check "dtrain trains on what it fetched" $? "$(tail -2 "$T/train.out")"
get ok "$URL/good.tar.gz" "$MD5"
[ "$rc" = 0 ] && grep -q "already complete" "$T/ok.out"
check "a second run has nothing to do" $? "exit $rc: $(cat "$T/ok.out")"

get sum "$URL/good.tar.gz" 0123456789abcdef0123456789abcdef
[ "$rc" = 1 ] && one_line sum && grep -q "MD5 $MD5, expected 0123" "$T/sum.out" && empty sum
check "a wrong checksum: one line with both sums, exit 1, nothing written" $? "exit $rc: $(cat "$T/sum.out")"

get cut "$URL/cut/good.tar.gz" "$MD5"
[ "$rc" = 1 ] && one_line cut && grep -q "cannot fetch $URL/cut/good.tar.gz" "$T/cut.out" && empty cut
check "a download cut short: one line, exit 1, nothing written" $? "exit $rc: $(cat "$T/cut.out")"

get gone "http://127.0.0.1:1/good.tar.gz" "$MD5"
[ "$rc" = 1 ] && one_line gone && grep -q "cannot fetch" "$T/gone.out" && empty gone
check "an unreachable server: one line, exit 1, nothing written" $? "exit $rc: $(cat "$T/gone.out")"

get nobatch "$URL/other.tar.gz" "$OTHER_MD5"
[ "$rc" = 1 ] && one_line nobatch && grep -q "six batches" "$T/nobatch.out" && empty nobatch
check "an archive without the batches: one line, exit 1, nothing written" $? "exit $rc: $(cat "$T/nobatch.out")"

# a folder in the way, not whole: refused, left as it was
mkdir -p "$T/inway/cifar10/cifar-10-batches-bin"
echo mine >"$T/inway/cifar10/cifar-10-batches-bin/data_batch_1.bin"
get inway "$URL/good.tar.gz" "$MD5"
[ "$rc" = 1 ] && one_line inway && grep -q "move it away" "$T/inway.out" &&
    [ "$(cat "$T/inway/cifar10/cifar-10-batches-bin/data_batch_1.bin")" = mine ] &&
    [ "$(ls -A "$T/inway/cifar10/cifar-10-batches-bin")" = data_batch_1.bin ] && [ -z "$(find "$T/inway" -name '.get-data*')" ]
check "an incomplete folder in the way: one line, exit 1, left as it was" $? "exit $rc: $(cat "$T/inway.out")"

# the texts (scripts/get-data kjv | fortunes): made from Debian's packages, SHA-256 checked,
# written whole, a second run nothing to do, a file in the way (not the text) left as it was
for text in kjv fortunes; do
    "$GET" $text "$T/texts" >"$T/$text.out" 2>&1; rc=$?
    sum=$(sha256sum "$T/texts/$text/$text.txt" 2>/dev/null | cut -d' ' -f1)
    want=$(grep -o "^${text^^}_SHA256=[0-9a-f]*" "$GET" | cut -d= -f2)
    [ "$rc" = 0 ] && [ -n "$sum" ] && [ "$sum" = "$want" ] && [ -z "$(find "$T/texts" -name '.*')" ]
    check "get-data $text: the text, its SHA-256 as pinned" $? "exit $rc, $sum: $(tail -1 "$T/$text.out")"
    "$GET" $text "$T/texts" >"$T/$text.out" 2>&1; rc=$?
    [ "$rc" = 0 ] && grep -q "already complete" "$T/$text.out"
    check "get-data $text: a second run has nothing to do" $? "exit $rc: $(cat "$T/$text.out")"
done
mkdir -p "$T/textway/kjv"
echo mine >"$T/textway/kjv/kjv.txt"
"$GET" kjv "$T/textway" >"$T/textway.out" 2>&1; rc=$?
[ "$rc" = 1 ] && [ "$(wc -l <"$T/textway.out")" = 1 ] && grep -q "move it away" "$T/textway.out" &&
    [ "$(cat "$T/textway/kjv/kjv.txt")" = mine ] && [ "$(ls -A "$T/textway/kjv")" = kjv.txt ]
check "get-data kjv: another file in the way: one line, exit 1, left as it was" $? "exit $rc: $(cat "$T/textway.out")"

finish
