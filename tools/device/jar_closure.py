#!/usr/bin/env python3
"""Prints the class files of a jar that classes of one package reach (jdeps, class level), for cutting the jar down.

Usage: jar_closure.py JDEPS EXTRACTED_JAR_DIR ROOT_PACKAGE
  JDEPS               the jdeps tool (a JDK's bin/jdeps)
  EXTRACTED_JAR_DIR   the jar unzipped (module-info.class removed: jdeps would ask for the modules it requires)
  ROOT_PACKAGE        e.g. org.apache.commons.compress.archivers.tar

Prints paths relative to the directory, one a line: every class the package's classes reach inside the jar (their
inner classes included), and the multi-release copies of those under META-INF/versions/N/.
"""
import collections
import os
import re
import subprocess
import sys


def main():
    jdeps, root, package = sys.argv[1:4]
    out = subprocess.run([jdeps, "-verbose:class", "-filter:none", "--ignore-missing-deps", root],
                         capture_output=True, text=True, check=True).stdout
    edges = collections.defaultdict(set)
    for line in out.splitlines():
        m = re.match(r"\s+(\S+)\s+->\s+(\S+)", line)
        if m:
            edges[m.group(1)].add(m.group(2))
    inside = set(edges)
    for deps in edges.values():
        inside.update(d for d in deps if os.path.exists(os.path.join(root, d.replace(".", "/") + ".class")))
    todo = [c for c in inside if c.rsplit(".", 1)[0] == package]
    if not todo:
        sys.exit(f"no class of {package} in {root}")
    keep = set()
    while todo:
        c = todo.pop()
        if c in keep or c not in inside:
            continue
        keep.add(c)
        todo.extend(edges.get(c, ()))
    versions = os.path.join(root, "META-INF", "versions")
    releases = sorted(os.listdir(versions)) if os.path.isdir(versions) else []
    for c in sorted(keep):
        path = c.replace(".", "/") + ".class"
        print(path)
        for r in releases:
            if os.path.exists(os.path.join(versions, r, path)):
                print(f"META-INF/versions/{r}/{path}")


if __name__ == "__main__":
    main()
