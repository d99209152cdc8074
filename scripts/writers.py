#!/usr/bin/env python3
"""Which files write each field of the supervisor's core structs (make layers).

usage: scripts/writers.py TABLE [--shrink]

For each field of struct session and struct sup (supervisor/private.h) and
struct run (supervisor/supervisor.h), the .c files of supervisor/ that
assign it: `x->f =`, `x.f =`, a compound assignment (`+=`, `|=`, ...),
`++`/`--` before or after, an element (`x->f[i] =`).  A reader of the
text with a little of the types: the struct written is the one of the
nearest `struct T *x` or `struct T x` declared above the write in its
function (parameters included), followed through the fields the three
structs declare as `struct T` (`s->cur->f` is a run's); a write to
another struct's field of the same name (a replay's `lost`, a message's
`restore`) is not counted, and where the type is not found so (a name
declared second in a list, a cast) the name alone decides, for every
struct with a field of that name.  A write through a pointer to it
(`memset(&x->f, ...)`, `snprintf(x->f, ...)`) is not seen.

TABLE lists the fields written by more than one file today, a ratchet:
    struct.field: file1 file2 ...
A field that gains a writer file outside its line fails; so does a line
naming a file that no longer writes the field (`make layers-shrink`
rewrites the table without them).  Prints the counts."""
import os
import re
import sys

FOLDER = 'supervisor'
STRUCTS = (('session', 'supervisor/private.h'), ('sup', 'supervisor/private.h'),
           ('run', 'supervisor/supervisor.h'))
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
ASSIGN = r'(?:=(?!=)|<<=|>>=|[-+*/%&|^]=|\+\+|--)'
LVALUE = r'[A-Za-z_][\w]*(?:\s*(?:->|\.)\s*\w+|\s*\[[^\]\n]*\])*'


def clean(text):
    """The text without comments and strings, its lines kept."""
    def blank(m):
        return ' ' + '\n' * m.group(0).count('\n')
    return STRING.sub('""', COMMENT.sub(blank, text))


def fields(struct, header):
    with open(header, encoding='utf-8') as fh:
        text = clean(fh.read())
    m = re.search(r'\bstruct\s+' + struct + r'\s*\{', text)
    if not m:
        sys.exit(f'writers: no struct {struct} in {header}')
    depth, i = 1, m.end()
    while depth:
        depth += {'{': 1, '}': -1}.get(text[i], 0)
        i += 1
    body = text[m.end():i - 1]
    names = []
    for decl in body.split(';'):
        decl = re.sub(r'\[[^\]]*\]', '', decl).strip()
        if not decl or '(' in decl:
            continue
        for part in decl.split(','):
            w = re.findall(r'\w+', part)
            if w:
                names.append(w[-1])
    return names


def field_structs(struct, header):
    """{field: T} for the fields of a struct declared as `struct T` (or a
    pointer to one)."""
    with open(header, encoding='utf-8') as fh:
        text = clean(fh.read())
    m = re.search(r'\bstruct\s+' + struct + r'\s*\{', text)
    depth, i = 1, m.end()
    while depth:
        depth += {'{': 1, '}': -1}.get(text[i], 0)
        i += 1
    out = {}
    for decl in text[m.end():i - 1].split(';'):
        t = re.match(r'\s*(?:const\s+)?struct\s+(\w+)\s+(.*)$', decl, re.S)
        if not t or '(' in decl:
            continue
        for part in re.sub(r'\[[^\]]*\]', '', t.group(2)).split(','):
            w = re.findall(r'\w+', part)
            if w:
                out[w[-1]] = t.group(1)
    return out


CHAIN_END = re.compile(r'(' + LVALUE + r')\s*$')


def owner(text, at, chain, inner):
    """The struct whose field the lvalue `chain` (its last field left off)
    writes, as far as the text says, or None: the type of its first name
    from the nearest declaration above `at`, then of each field on the
    way from inner ({(struct, field): T})."""
    parts = re.findall(r'(?:->|\.)\s*(\w+)', chain)
    base = re.match(r'\s*(\w+)', chain).group(1)
    decl = None
    # Within the function the write is in (its parameters and body: from
    # the end of the one before), so that another function's declaration
    # of the same name never decides.
    start = text.rfind('\n}', 0, at) + 1
    for d in re.finditer(r'\bstruct\s+(\w+)\s*(?:\*\s*(?:const\s+)?)*' + re.escape(base) + r'\b\s*[=;,)\[]',
                         text[start:at]):
        decl = d.group(1)
    t = decl
    for f in parts:
        if t is None:
            return None
        t = inner.get((t, f))
    return t


def typed_writes(path, names, inner=None):
    """{(struct or None, field name): lines} of the assignments to those
    names in a file; None where the struct is not known (owner)."""
    with open(path, encoding='utf-8') as fh:
        text = clean(fh.read())
    found = {}
    post = re.compile(r'(?:->|(?<=[\w\]\)])\.)\s*(\w+)\s*(?:\[[^\]\n]*\]\s*)*' + ASSIGN)
    pre = re.compile(r'(?:\+\+|--)\s*(' + LVALUE + ')')
    for m in post.finditer(text):
        if m.group(1) in names:
            c = CHAIN_END.search(text, max(0, m.start() - 300), m.start())
            t = owner(text, m.start(), c.group(1), inner or {}) if c else None
            found.setdefault((t, m.group(1)), []).append(text.count('\n', 0, m.start()) + 1)
    for m in pre.finditer(text):
        last = re.findall(r'(?:->|\.)\s*(\w+)', m.group(1))
        if last and last[-1] in names:
            chain = re.sub(r'\s*(?:->|\.)\s*\w+\s*(?:\[[^\]\n]*\]\s*)*$', '', m.group(1))
            t = owner(text, m.start(), chain, inner or {})
            found.setdefault((t, last[-1]), []).append(text.count('\n', 0, m.start()) + 1)
    return found


def writes(path, names):
    """{field name: lines} of the assignments to those names in a file,
    whatever struct they belong to."""
    found = {}
    for (_, name), lines in typed_writes(path, names).items():
        found.setdefault(name, []).extend(lines)
    return {k: sorted(v) for k, v in found.items()}


def visible(path):
    """The structs a file can see: a file that includes neither header
    has fields of the same names in structs of its own."""
    with open(path, encoding='utf-8') as fh:
        incs = re.findall(r'^\s*#\s*include\s+"([^"]+)"', fh.read(), re.M)
    seen = set()
    for struct, header in STRUCTS:
        if any(os.path.basename(i) == os.path.basename(header) for i in incs):
            seen.add(struct)
    if 'private.h' in incs:
        seen.add('run')
    return seen


def read_table(path):
    table = {}
    if os.path.exists(path):
        with open(path, encoding='utf-8') as fh:
            for line in fh:
                line = line.split('#', 1)[0].strip()
                if ':' in line:
                    k, v = line.split(':', 1)
                    table[k.strip()] = set(v.split())
    return table


HEAD = """# The fields of struct session, struct sup and struct run that more than
# one file of supervisor/ writes today (scripts/writers.py, run by `make
# layers`; docs/ARCHITECTURE.md).  A ratchet: a field may lose writers,
# never gain one; `make layers-shrink` drops what the code no longer does.
"""


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    table_path, shrink = argv[1], '--shrink' in argv[2:]
    init = '--init' in argv[2:]
    per = {}
    for struct, header in STRUCTS:
        for f in fields(struct, header):
            per[f'{struct}.{f}'] = {}
    names = {k.split('.', 1)[1] for k in per}
    inner = {}
    for struct, header in STRUCTS:
        for f, t in field_structs(struct, header).items():
            inner[(struct, f)] = t
    for f in sorted(os.listdir(FOLDER)):
        if not f.endswith('.c'):
            continue
        seen = visible(os.path.join(FOLDER, f))
        for (t, name), lines in typed_writes(os.path.join(FOLDER, f), names, inner).items():
            for key in per:
                s, n = key.split('.', 1)
                if n == name and s in seen and t in (None, s):
                    per[key].setdefault(f[:-2], []).extend(lines)
    multi = {k: set(v) for k, v in per.items() if len(v) > 1}
    if not os.path.exists(table_path) and not init:
        print(f'writers: {table_path} is missing: restore it from git', file=sys.stderr)
        return 1
    table = multi if init else read_table(table_path)
    problems = []
    for key in sorted(multi):
        extra = multi[key] - table.get(key, set())
        if extra:
            where = '; '.join(f'{FOLDER}/{f}.c:{",".join(map(str, per[key][f][:3]))}' for f in sorted(extra))
            problems.append(f'{key} gains a writer ({where}); its writers now: '
                            f'{" ".join(sorted(multi[key]))}. One file writes a field: call a function '
                            'of the file that owns it. If the new writer is meant, set the line '
                            f'"{key}: {" ".join(sorted(multi[key]))}" in {table_path} by hand and say '
                            'why in the commit')
    stale = {k: v - multi.get(k, set()) for k, v in table.items() if v - multi.get(k, set())}
    if shrink or init:
        with open(table_path, 'w', encoding='utf-8') as fh:
            fh.write(HEAD)
            for key in sorted(multi):
                keep = multi[key] if init else multi[key] & table.get(key, set())
                if len(keep) > 1:
                    fh.write(f'{key}: {" ".join(sorted(keep))}\n')
        if stale:
            print(f'writers: {table_path}: {len(stale)} line(s) shrunk')
    elif stale:
        problems.append(f'{table_path} names writers the code no longer has ('
                        + ', '.join(f'{k}: {" ".join(sorted(v))}' for k, v in sorted(stale.items()))
                        + '): the table only shrinks; run `make layers-shrink` and commit it')
    for p in problems:
        print('writers: ' + p, file=sys.stderr)
    counts = []
    for struct, _ in STRUCTS:
        keys = [k for k in per if k.startswith(struct + '.')]
        m = [k for k in keys if k in multi]
        counts.append(f'struct {struct} {len(m)} of {len(keys)}')
    top = sorted(multi, key=lambda k: (-len(multi[k]), k))[:6]
    print('writers: fields written by more than one file: ' + ', '.join(counts)
          + ('; most: ' + ', '.join(f'{k} ({len(multi[k])})' for k in top) if top else ''))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
