#!/usr/bin/env python3
"""Puts the files under DIR into the jar JAR (entry name = the path relative to DIR), replacing entries of the same name.

The device bundle carries the kernels jar without its PTX (they travel as one xz archive, about 1 MB less than deflated
inside the jar; tools/device/build.sh); run.sh and run-multi.sh put them back with this before any Java starts, and run.sh's
ab step makes a second kernels jar with an earlier build's PTX the same way.

Usage: jar_put.py JAR DIR
"""
import os
import sys
import zipfile


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    jar, top = sys.argv[1], sys.argv[2]
    files = {}
    for d, _, names in os.walk(top):
        for f in names:
            p = os.path.join(d, f)
            files[os.path.relpath(p, top).replace(os.sep, '/')] = p
    if not files:
        sys.exit(f"jar_put.py: nothing under {top}")
    with zipfile.ZipFile(jar) as src:
        entries = [(i, src.read(i.filename)) for i in src.infolist()]
    tmp = jar + '.tmp'
    with zipfile.ZipFile(tmp, 'w', zipfile.ZIP_DEFLATED) as out:
        for info, data in entries:
            if info.filename not in files:
                out.writestr(info, data)
        for name, p in sorted(files.items()):
            with open(p, 'rb') as f:
                out.writestr(name, f.read())
    os.replace(tmp, jar)


if __name__ == '__main__':
    main()
