"""Text outputs of scripts/report (and scripts/table): Markdown and CSV tables, and files
written atomically (a temporary file in the same folder renamed over the target, so a reader
finds the old file or the whole new one, never half of one), readable by their owner whatever
the umask."""
import csv
import io
import os
import tempfile


class OutError(Exception):
    """A one-line reason naming the file."""


def markdown(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c).replace("|", "/") for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def csv_text(header, rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def output_mode():
    """The mode of a new output: 0666 less the umask, with the owner's read and write always
    kept. A report or a figure its owner cannot open is no output (umask 0777 would give 000),
    and the group's and others' bits are what the umask is about."""
    mask = os.umask(0o022)
    os.umask(mask)
    return (0o666 & ~mask) | 0o600


def write_atomically(path, write, error=None):
    """Calls write(tmp) to fill a temporary file beside PATH, syncs it and renames it over PATH;
    on failure removes it and raises ERROR (OutError by default): "PATH: cannot write: why".
    The temporary is made new under a name nobody can know in advance (tempfile.mkstemp:
    .NAME.tmp.PID.RANDOM, mode 0600 while it is written, so the tool can always read it back),
    and gets output_mode() just before the rename.
    PATH that exists and is not a regular file (/dev/null, a FIFO, a terminal) is written
    directly: a rename would replace the device or pipe itself with a file."""
    try:
        special = os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path)
    except OSError:
        special = False
    if special:
        try:
            write(path)
        except OSError as e:
            raise (error or OutError)(f"{path}: cannot write: {e.strerror}") from None
        return
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.tmp.{os.getpid()}.",
                                   dir=os.path.dirname(path) or ".")
        os.close(fd)
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, output_mode())
        os.replace(tmp, path)
    except OSError as e:
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise (error or OutError)(f"{path}: cannot write: {e.strerror}")


def write_text(path, text):
    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
    write_atomically(path, write)
