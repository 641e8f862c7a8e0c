# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GRUB sources and grub.cfg: pure parsers and the command line merge (text in, text out).

update-grub (grub-mkconfig) sources ``/etc/default/grub`` and then every
``/etc/default/grub.d/*.cfg`` in name order, and writes ``ro $GRUB_CMDLINE_LINUX
$GRUB_CMDLINE_LINUX_DEFAULT`` into every normal entry. Ubuntu cloud images ship, in
``/etc/default/grub.d/50-cloudimg-settings.cfg``::

    # Set the default commandline
    GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0"

and sites append with ``GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX hugepages=32"``: a parameter set in
``/etc/default/grub`` and again in a drop-in is given twice. ``plan()`` edits every source so the
command line the sources give satisfies the rules of ``cmdline``: owned and forbidden parameters
are removed wherever they are, the required ones are written once, in order, into the assignment of
``GRUB_CMDLINE_LINUX`` that every later one builds on, and every other word stays where it is.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.provision.plugins.module_utils._os import cmdline as _cmdline

CMDLINE_VARS = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT")
MAIN = "etc/default/grub"
DROPINS = "etc/default/grub.d"
_ASSIGN = re.compile(r"^(?P<lead>\s*(?:export\s+)?)(?P<var>GRUB_[A-Z_]+)=(?P<rhs>.*)$")
_REF = re.compile(r"^\$(?:\{(\w+)\}|(\w+))$")
_UNSAFE = re.compile(r"[`\\]|\$\(")
# Control bytes no shell source holds (tab, newline, form feed, carriage return and escape are text).
_BINARY = re.compile(b"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")


class GrubError(ValueError):
    """A GRUB source that cannot be read or edited safely; the message names the file and line."""


class Assignment:
    """``GRUB_CMDLINE_LINUX="a b $GRUB_CMDLINE_LINUX"`` at ``rel:number``."""

    def __init__(self, rel, number, lead, var, quote, words, tail):
        self.rel = rel
        self.number = number
        self.lead = lead
        self.var = var
        self.quote = quote
        self.words = words
        self.tail = tail

    @property
    def where(self):
        return "%s:%d" % (self.rel, self.number)

    def refs(self):
        return [ref_name(w) for w in self.words if ref_name(w)]

    def render(self, words=None):
        words = self.words if words is None else words
        quote = self.quote or '"'
        return "%s%s=%s%s%s%s" % (self.lead, self.var, quote, " ".join(words), quote, self.tail)


def ref_name(word):
    match = _REF.match(word)
    return (match.group(1) or match.group(2)) if match else None


def parse_assignment(rel, number, line, names=CMDLINE_VARS):
    """The assignment of one of ``names`` on ``line``, else None. Raises GrubError when the value
    cannot be edited word by word (command substitution, escapes, an unterminated quote)."""
    match = _ASSIGN.match(line)
    if not match or match.group("var") not in names:
        return None
    rhs = match.group("rhs")
    where = "%s line %d" % (rel, number)
    if rhs[:1] in ("'", '"'):
        end = rhs.find(rhs[0], 1)
        if end < 0:
            raise GrubError("%s: unterminated quote: %r" % (where, line))
        quote, value, tail = rhs[0], rhs[1:end], rhs[end + 1:]
    else:
        stop = re.search(r"\s|#", rhs)
        quote, value, tail = "", rhs[:stop.start()] if stop else rhs, rhs[stop.start():] if stop else ""
    if tail.strip() and not tail.strip().startswith("#"):
        raise GrubError("%s: cannot edit %s: text after the value: %r" % (where, match.group("var"), line))
    if _UNSAFE.search(value) or (quote == '"' and '"' in value) or ("'" in value or '"' in value):
        raise GrubError("%s: cannot edit %s word by word (quotes, escapes or command substitution): %r"
                        % (where, match.group("var"), line))
    return Assignment(rel, number, match.group("lead"), match.group("var"), quote, value.split(), tail)


# A line that sets one of the variables this collection edits, whether or not it is an assignment.
_SETTER = re.compile(r"^\s*(?:export\s+)?(?P<var>GRUB_CMDLINE_LINUX(?:_DEFAULT)?|GRUB_DEFAULT)\b")


def check_source(rel, text):
    """Raise GrubError naming ``rel`` and the line when update-grub could not source ``text`` as we
    read it: a quote (``'``, ``"``, a backtick) opened and never closed (the shell would swallow every
    line after it), or a line naming GRUB_CMDLINE_LINUX, GRUB_CMDLINE_LINUX_DEFAULT or GRUB_DEFAULT
    that is not ``NAME=value`` (``GRUB_CMDLINE_LINUX = "quiet"``, ``GRUB_CMDLINE_LINUX+=...``: a
    command to the shell, not a setting). A sample of what is accepted::

        GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`
        GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX hugepages=32"   # a comment's ' is no quote
    """
    quote, opened = None, 0
    for number, line in enumerate(text.splitlines(), 1):
        setter = _SETTER.match(line) if quote is None else None
        if setter and not _ASSIGN.match(line):
            raise GrubError("%s line %d: %s is not set with NAME=value (no blanks around =): %r"
                            % (rel, number, setter.group("var"), line))
        index = 0
        while index < len(line):
            char = line[index]
            if quote is None:
                if char == "#" and (index == 0 or line[index - 1] in " \t;&|("):
                    break
                if char == "\\":
                    index += 1
                elif char in "'\"`":
                    quote, opened = char, number
            elif char == quote:
                quote = None
            elif char == "\\" and quote != "'":
                index += 1
            index += 1
    if quote is not None:
        raise GrubError("%s line %d: unterminated quote (the %s opened there is never closed)" % (rel, opened, quote))


def check_text(rel, data):
    """``data`` (bytes of a GRUB source) as text; GrubError naming ``rel`` when it is not text: a NUL
    or another control byte (a binary or NUL-filled file), or not UTF-8."""
    match = _BINARY.search(data)
    if match:
        raise GrubError("%s: binary content (byte 0x%02x at offset %d), not a GRUB source: not edited"
                        % (rel, ord(match.group(0)), match.start()))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GrubError("%s: not UTF-8 text (offset %d), not a GRUB source: not edited" % (rel, exc.start))
    check_source(rel, text)
    return text


def parse_sources(sources, names=CMDLINE_VARS):
    """[(rel, text)] in sourcing order -> [Assignment] in sourcing order."""
    out = []
    for rel, text in sources:
        for number, line in enumerate(text.splitlines(), 1):
            found = parse_assignment(rel, number, line, names)
            if found is not None:
                out.append(found)
    return out


def effective(assignments, words_of=None):
    """The command line the sources give: [(word, (assignment index, word index))], in order.

    ``words_of(index)``: the words of assignment ``index`` (default: as parsed); lets ``plan`` ask
    "what if" without copying assignments. A ``$VAR`` word expands to VAR's words so far.
    """
    env = dict((v, []) for v in CMDLINE_VARS)
    for index, assign in enumerate(assignments):
        words = assign.words if words_of is None else words_of(index)
        out = []
        for position, word in enumerate(words):
            name = ref_name(word)
            if name:
                out.extend(env.get(name, []))
            else:
                out.append((word, (index, position)))
        env[assign.var] = out
    return env["GRUB_CMDLINE_LINUX"] + env["GRUB_CMDLINE_LINUX_DEFAULT"]


def _owner(assignments):
    """Index of the GRUB_CMDLINE_LINUX assignment every later one builds on: the last one that does
    not refer to itself (or the first when all do); None when no source sets it."""
    linux = [i for i, a in enumerate(assignments) if a.var == "GRUB_CMDLINE_LINUX"]
    plain = [i for i in linux if "GRUB_CMDLINE_LINUX" not in assignments[i].refs()]
    if plain:
        return plain[-1]
    return linux[0] if linux else None


def plan(sources, rule):
    """Edit ``sources`` ([(rel, text)] in sourcing order) so their command line satisfies ``rule``.

    Returns {"changed": {rel: new text}, "before": [words], "after": [words], "problems": [str]
    (of the sources as they were)}. Sources whose command line is already right are left as they
    are, byte for byte, whatever order the parameters are in. Raises GrubError naming the file when
    the result would still be wrong (e.g. GRUB_CMDLINE_LINUX_DEFAULT refers to $GRUB_CMDLINE_LINUX).
    """
    if not sources or sources[0][0] != MAIN:
        raise GrubError("%s missing: the GRUB sources start there" % MAIN)
    assignments = parse_sources(sources)
    before = [w for w, _o in effective(assignments)]
    found = _cmdline.problems(before, rule)
    if not found:
        return {"changed": {}, "before": before, "after": before, "problems": []}
    new_words = []
    for assign in assignments:
        keep = [w for w in assign.words if ref_name(w) or not _cmdline.is_owned(w, rule)]
        new_words.append(keep)
    owner = _owner(assignments)
    added_line = None
    if owner is None:
        added_line = Assignment(MAIN, len(sources[0][1].splitlines()) + 1, "", "GRUB_CMDLINE_LINUX", '"', [], "")
        assignments.append(added_line)
        new_words.append([])
        owner = len(assignments) - 1
    new_words[owner] = new_words[owner] + list(rule["params"])
    # Of a key nobody owns given twice, keep the last (the one the kernel honours for most keys).
    tokens = effective(assignments, lambda i: new_words[i])
    last = {}
    for word, origin in tokens:
        key = _cmdline.split(word)[0]
        if key not in rule["allow_repeated"] and key not in rule["owned_keys"]:
            last[key] = origin
    drop = set(origin for word, origin in tokens
               if _cmdline.split(word)[0] in last and last[_cmdline.split(word)[0]] != origin)
    for index, words in enumerate(new_words):
        new_words[index] = [w for position, w in enumerate(words) if (index, position) not in drop]
    after = [w for w, _o in effective(assignments, lambda i: new_words[i])]
    left = _cmdline.problems(after, rule)
    if left:
        raise GrubError("cannot make the GRUB sources give the command line (%s): %s; assignments: %s" % (
            " ".join(rule["params"]), "; ".join(left), ", ".join(a.where for a in assignments)))
    changed = {}
    for rel, text in sources:
        lines = text.splitlines()
        edited = False
        for index, assign in enumerate(assignments):
            if assign.rel != rel or assign is added_line or new_words[index] == assign.words:
                continue
            lines[assign.number - 1] = assign.render(new_words[index])
            edited = True
        if added_line is not None and rel == MAIN:
            lines.append(added_line.render(new_words[-1]))
            edited = True
        if edited:
            changed[rel] = "\n".join(lines) + "\n"
    return {"changed": changed, "before": before, "after": after, "problems": found}


def set_default(sources, value):
    """Make GRUB_DEFAULT ``value`` in the source that decides it (the last one assigning it; else
    append to /etc/default/grub). Returns {rel: new text} ({} when it already is ``value``).
    Raises GrubError when ``value`` (menu ids read from grub.cfg) would not stay one quoted word."""
    if not value or re.search(r'["$`\\]|[\x00-\x1f\x7f]', value):
        raise GrubError("GRUB_DEFAULT %r: not written, a menu entry id with quotes, $, backticks, backslashes or "
                        "control characters cannot be one quoted value" % value)
    assignments = []
    for rel, text in sources:
        for number, line in enumerate(text.splitlines(), 1):
            match = _ASSIGN.match(line)
            if match and match.group("var") == "GRUB_DEFAULT":
                assignments.append((rel, number, match))
    want = 'GRUB_DEFAULT="%s"' % value
    if assignments:
        rel, number, match = assignments[-1]
        rhs = match.group("rhs").strip()
        current = rhs[1:-1] if rhs[:1] in ("'", '"') and rhs.endswith(rhs[0]) else rhs.split("#")[0].strip()
        if current == value:
            return {}
        text = dict(sources)[rel]
        lines = text.splitlines()
        lines[number - 1] = match.group("lead") + want
        return {rel: "\n".join(lines) + "\n"}
    text = dict(sources)[MAIN]
    return {MAIN: text.rstrip("\n") + "\n" + want + "\n"}


def source_default(sources):
    """The GRUB_DEFAULT the sources give ("0" when none does)."""
    value = "0"
    for _rel, text in sources:
        for line in text.splitlines():
            match = _ASSIGN.match(line)
            if match and match.group("var") == "GRUB_DEFAULT":
                rhs = match.group("rhs").strip()
                value = rhs[1:-1] if rhs[:1] in ("'", '"') and rhs.endswith(rhs[0]) else rhs.split("#")[0].strip()
    return value


# ---------------------------------------------------------------- grub.cfg (what GRUB boots)

def parse_cfg(text):
    """grub.cfg -> (default, entries): entries [{title, id, linux, children}] in file order.

    Sample (update-grub's 10_linux)::

        set default="0"
        menuentry 'Ubuntu' --class ubuntu $menuentry_id_option 'gnulinux-simple-UUID' {
                linux   /boot/vmlinuz-6.8.0-45-generic root=UUID=... ro  quiet splash
        }
        submenu 'Advanced options for Ubuntu' $menuentry_id_option 'gnulinux-advanced-UUID' {
                menuentry 'Ubuntu, with Linux 6.8.0-40-generic' ... 'gnulinux-6.8.0-40-generic-advanced-UUID' {
    """
    default = "0"
    top = []
    stack = [top]
    current = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("set default="):
            default = line[len("set default="):].strip().strip('"').strip("'")
        elif line.startswith(("menuentry ", "submenu ")):
            title = re.match(r"^\S+\s+(?:'([^']*)'|\"([^\"]*)\"|(\S+))", line)
            ident = re.search(r"\$menuentry_id_option\s+'([^']*)'", line)
            entry = {"title": (title.group(1) or title.group(2) or title.group(3)) if title else "",
                     "id": ident.group(1) if ident else None, "linux": None, "children": []}
            stack[-1].append(entry)
            if line.endswith("{"):
                stack.append(entry["children"])
                current.append(entry)
        elif line == "}":
            if len(stack) > 1:
                stack.pop()
                current.pop()
        elif current and line.split(None, 1)[0] in ("linux", "linuxefi", "linux16"):
            parts = line.split(None, 1)
            current[-1]["linux"] = parts[1] if len(parts) > 1 else ""
    return default, top


def parse_grubenv(text):
    out = {}
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith("#"):
            out[key] = value
    return out


def resolve(default, entries, grubenv=None):
    """The entry GRUB boots for ``default`` (index, "saved", title, id, "a>b"); entry 0 when invalid,
    as GRUB falls back. Returns (entry, path) or (None, None)."""
    if default == "saved":
        default = (grubenv or {}).get("saved_entry") or "0"
    level, chosen, path = entries, None, []
    for part in default.split(">"):
        found = None
        if part.isdigit():
            if int(part) < len(level):
                found = level[int(part)]
        else:
            found = next((e for e in level if part in (e["title"], e["id"])), None)
        if found is None:
            chosen = None
            break
        chosen, level = found, found["children"]
        path.append(found)
    if chosen is None or chosen["linux"] is None:
        chosen, path = (entries[0], [entries[0]]) if entries else (None, [])
        while chosen is not None and chosen["linux"] is None and chosen["children"]:
            chosen = chosen["children"][0]
            path.append(chosen)
    return chosen, path


def linux_release(linux):
    """``/boot/vmlinuz-6.8.0-45-generic root=... ro`` -> ("6.8.0-45-generic", ["root=...", "ro"])."""
    image, _sep, args = (linux or "").partition(" ")
    name = image.rsplit("/", 1)[-1]
    return (name[len("vmlinuz-"):] if name.startswith("vmlinuz-") else name), args.split()


def default_entry(cfg_text, grubenv_text=None):
    """{release, args, title} of the entry GRUB boots next, None when grub.cfg has none."""
    default, entries = parse_cfg(cfg_text)
    entry, _path = resolve(default, entries, parse_grubenv(grubenv_text))
    if entry is None or not entry["linux"]:
        return None
    release, args = linux_release(entry["linux"])
    return {"release": release, "args": args, "title": entry["title"]}


def entry_for_release(cfg_text, release):
    """The GRUB_DEFAULT value (by menu ids, "submenu>entry") that boots ``release`` normally (not
    the recovery entry), None when grub.cfg has no such entry."""
    _default, entries = parse_cfg(cfg_text)
    found = []

    def walk(level, trail):
        for entry in level:
            here = trail + [entry["id"] or entry["title"]]
            normal = "recovery" not in (entry["id"] or "") + entry["title"] and " single" not in " " + (entry["linux"] or "")
            if entry["linux"] and normal and linux_release(entry["linux"])[0] == release:
                found.append(here)
            walk(entry["children"], here)

    walk(entries, [])
    # The entry named for the release ("gnulinux-<release>-advanced-UUID") rather than the top
    # "simple" entry, which boots whatever kernel is newest after the next update-grub.
    named = [path for path in found if release in path[-1]]
    chosen = (named or found or [None])[0]
    return ">".join(chosen) if chosen else None
