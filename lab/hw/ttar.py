"""Text archives of file trees (after prometheus/procfs ``fixtures.ttar``).

A captured sysfs/procfs tree is kept in git as one reviewable text file. Each entry::

    Path: sys/bus/pci/devices/0000:18:00.0
    SymlinkTo: ../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0
    # ttar - - -
    Path: sys/devices/system/node/node0/cpulist
    Lines: 1
    0-12,104-116
    Mode: 444
    # ttar - - -
    Path: sys/devices/pci0000:15/0000:15:01.0/config
    Encoding: zlib+base64
    Lines: 1
    <base64 of the zlib-compressed binary config space>
    Mode: 444

Directories are ``Directory: <path>`` entries. Text content keeps a missing final newline with
``NoNewline: true`` (sysfs files always end in one; hand-made garbage may not).
Only the standard library: this also runs inside the lab's twins with Debian's python3.
"""
import base64
import os
import stat
import zlib

SEPARATOR = "# ttar - - -"


def pack(root):
    """Return the text archive of the tree under ``root`` (paths sorted, relative)."""
    out = ["# gpufleet ttar v1"]
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out += ["Path: " + rel, "SymlinkTo: " + os.readlink(full), SEPARATOR]
            elif stat.S_ISDIR(st.st_mode):
                out += ["Directory: " + rel, "Mode: %o" % stat.S_IMODE(st.st_mode), SEPARATOR]
            else:
                with open(full, "rb") as handle:
                    data = handle.read()
                out.append("Path: " + rel)
                out += _encode(data)
                out += ["Mode: %o" % stat.S_IMODE(st.st_mode), SEPARATOR]
    return "\n".join(out) + "\n"


def _encode(data):
    try:
        text = data.decode("utf-8")
        if "\x00" in text or "\r" in text:
            raise ValueError("binary")
    except ValueError:
        # Binary (PCI config space): mostly zeros, so compressed before base64.
        b64 = base64.b64encode(zlib.compress(data, 9)).decode("ascii")
        chunks = [b64[i:i + 76] for i in range(0, len(b64), 76)] or [""]
        return ["Encoding: zlib+base64", "Lines: %d" % len(chunks)] + chunks
    lines = text.split("\n")
    header = []
    if text.endswith("\n"):
        lines = lines[:-1]
    elif text:
        header.append("NoNewline: true")
    else:
        lines = []
    return header + ["Lines: %d" % len(lines)] + lines


def unpack(text, dest):
    """Write the archive ``text`` under ``dest`` (created). Returns the number of entries."""
    lines = text.split("\n")
    i, count = 0, 0
    os.makedirs(dest, exist_ok=True)
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(": ")
        if key == "Directory":
            path = _safe_join(dest, value)
            os.makedirs(path, exist_ok=True)
            mode, i = _read_mode(lines, i)
            os.chmod(path, mode if mode is not None else 0o755)
        elif key == "Path":
            path = _safe_join(dest, value)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            header = {}
            while i < len(lines) and not lines[i].startswith("Lines: ") and not lines[i].startswith("SymlinkTo: "):
                hkey, _, hval = lines[i].partition(": ")
                header[hkey] = hval
                i += 1
            if lines[i].startswith("SymlinkTo: "):
                os.symlink(lines[i][len("SymlinkTo: "):], path)
                i += 1
            else:
                n = int(lines[i][len("Lines: "):])
                body = lines[i + 1:i + 1 + n]
                i += 1 + n
                if header.get("Encoding") == "base64":
                    data = base64.b64decode("".join(body))
                elif header.get("Encoding") == "zlib+base64":
                    data = zlib.decompress(base64.b64decode("".join(body)))
                else:
                    content = "\n".join(body)
                    if n and header.get("NoNewline") != "true":
                        content += "\n"
                    data = content.encode("utf-8")
                with open(path, "wb") as handle:
                    handle.write(data)
                mode, i = _read_mode(lines, i)
                os.chmod(path, mode if mode is not None else 0o644)
        else:
            raise ValueError("ttar line %d: unexpected %r" % (i, line))
        count += 1
    return count


def _read_mode(lines, i):
    if i < len(lines) and lines[i].startswith("Mode: "):
        return int(lines[i][len("Mode: "):], 8), i + 1
    return None, i


def _safe_join(dest, rel):
    path = os.path.normpath(os.path.join(dest, rel))
    if not (path + os.sep).startswith(os.path.normpath(dest) + os.sep):
        raise ValueError("ttar path escapes the destination: %r" % rel)
    return path
