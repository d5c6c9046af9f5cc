#!/usr/bin/env python3
"""Makes a kustomize corpus for wild.py out of repository checkouts, keeping only what builds read.

    python3 tests/kustomize/wild-collect.py OUT CHECKOUT... [--name-from-parent]

Each CHECKOUT is a repository's work tree (its top directory). For every kustomization file in
it, the files that the tree can read are copied to OUT/<repository>/, at the same relative
paths: the kustomization files themselves and every path that a string in them names
(resources, bases, components, patches, generator `files`/`envs` with or without `key=`,
configurations, crds, openapi, replacements, transformer and generator files, ...), followed
into the directories they name. The repository's license file is copied too, and a line is
added to OUT/MANIFEST.tsv: repository, commit, license, trees, bytes. A repository without a
license file is skipped: nothing of it may be copied.

A repository's name is the CHECKOUT directory's name, with `+` standing for `/` (so
`fluxcd+flux2` is fluxcd/flux2); its commit is read from a `COMMIT` file in the checkout or
from `git rev-parse HEAD`.
"""

import argparse
import os
import shutil
import subprocess
import sys

import yaml

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
LICENSE_FILES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING", "LICENSE-APACHE")

# PyYAML reads a bare `=` (a replacement's delimiter, say) as YAML 1.1's value tag and fails;
# go-yaml, as kustomize, reads it as the string "=".
for _loader in (yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    _loader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))
LICENSE_NAMES = (
    ("Apache License", "Apache-2.0"),
    ("MIT License", "MIT"),
    ("Permission is hereby granted, free of charge", "MIT"),
    ("Mozilla Public License", "MPL-2.0"),
    ("BSD 3-Clause", "BSD-3-Clause"),
    ("Redistribution and use in source and binary forms", "BSD"),
    ("This is free and unencumbered software", "Unlicense"),
    ("GNU GENERAL PUBLIC LICENSE", "GPL"),
    ("GNU AFFERO GENERAL PUBLIC LICENSE", "AGPL"),
    ("DO WHAT THE FUCK YOU WANT TO PUBLIC LICENSE", "WTFPL"),
)


def strings_in(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def candidate_paths(text):
    """The paths a string may name: itself, and the part after `key=` for generator files."""
    text = text.strip()
    if not text or "\n" in text or "://" in text or len(text) > 4096:
        return []
    paths = [text]
    if "=" in text:
        paths.append(text.split("=", 1)[1])
    return paths


def inside(top, path):
    return os.path.commonpath([top, path]) == top


def kustomization_in(directory):
    for name in KUSTOMIZATION_FILES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return path
    return None


def closure(top, start):
    """Every file a build of `start` (a directory under top) can read."""
    files, seen_dirs, queue = set(), set(), [start]
    while queue:
        directory = queue.pop()
        if directory in seen_dirs:
            continue
        seen_dirs.add(directory)
        kustomization = kustomization_in(directory)
        if kustomization is None:
            # A directory of plain files named as a resource: kustomize reads only its
            # kustomization, so there is nothing else to take.
            continue
        files.add(kustomization)
        try:
            with open(kustomization, "rb") as handle:
                docs = list(yaml.safe_load_all(handle))
        except (OSError, yaml.YAMLError):
            continue
        for text in (s for doc in docs for s in strings_in(doc)):
            for relative in candidate_paths(text):
                path = os.path.realpath(os.path.join(directory, relative))
                if not inside(top, path):
                    continue
                if os.path.isdir(path):
                    queue.append(path)
                elif os.path.isfile(path):
                    files.add(path)
    return files


def license_of(top):
    for name in LICENSE_FILES:
        path = os.path.join(top, name)
        if os.path.isfile(path):
            with open(path, "rb") as handle:
                text = handle.read(4096).decode("utf-8", "replace")
            for marker, spdx in LICENSE_NAMES:
                if marker.lower() in text.lower():
                    return path, spdx
            return path, "see " + name
    return None, "unknown"


def commit_of(top):
    marker = os.path.join(top, "COMMIT")
    if os.path.isfile(marker):
        with open(marker) as handle:
            return handle.read().strip()
    done = subprocess.run(
        ["git", "-C", top, "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def collect(out, checkout):
    top = os.path.realpath(checkout)
    name = os.path.basename(top.rstrip("/"))
    license_path, license_name = license_of(top)
    if license_path is None:
        print(f"{name}: no license file, skipped", file=sys.stderr)
        return 0, 0
    wanted, trees = set(), 0
    for directory, subdirs, _ in os.walk(top):
        subdirs[:] = sorted(d for d in subdirs if d != ".git")
        if kustomization_in(directory):
            trees += 1
            wanted |= closure(top, os.path.realpath(directory))
    wanted.add(os.path.realpath(license_path))
    size = 0
    for path in sorted(wanted):
        target = os.path.join(out, name, os.path.relpath(path, top))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(path, target)
        size += os.path.getsize(path)
    with open(os.path.join(out, "MANIFEST.tsv"), "a") as manifest:
        repo = name.replace("+", "/", 1)
        manifest.write(f"{repo}\t{commit_of(top)}\t{license_name}\t{trees}\t{size}\n")
    return trees, size


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("checkouts", nargs="+")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    manifest = os.path.join(args.out, "MANIFEST.tsv")
    if not os.path.exists(manifest):
        with open(manifest, "w") as handle:
            handle.write("repository\tcommit\tlicense\ttrees\tbytes\n")
    total = 0
    for checkout in args.checkouts:
        trees, size = collect(args.out, checkout)
        total += size
        print(f"{os.path.basename(checkout.rstrip('/'))}: {trees} trees, {size} bytes")
    print(f"total {total} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
