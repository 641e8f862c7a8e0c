"""What a hostile case compares before and after: everything under a folder, so that "nothing was
written" is a check of the bytes, the links and the kinds of files, not of a few named paths."""
import os


def snapshot(top):
    """{relative path: bytes, 'folder', 'special' (a FIFO, a device) or ('link', target)} under ``top``."""
    out = {}
    for folder, dirs, files in os.walk(str(top)):
        for name in dirs + files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, str(top))
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                out[rel] = "folder"
            elif os.path.isfile(path):
                with open(path, "rb") as handle:
                    out[rel] = handle.read()
            else:
                out[rel] = "special"
    return out
