#!/usr/bin/env python3
"""Builds every kustomization tree of a corpus with ours and with kustomize, and compares them.

A corpus is a directory of repository trees (one sub-directory each, files as the repository
holds them). Every directory holding a `kustomization.yaml`, `kustomization.yml` or
`Kustomization` that is not a Component or a Flux `Kustomization` object is a build root; both
tools build it from the repository's top directory, so relative paths in messages agree:

    kustomize build --reorder none <root>
    kustomize-controller build <root>

Each root lands in one class:

    identical      both built, same bytes
    same-docs      both built, same documents (parsed), different bytes
    different      both built, different documents
    ours-refused   kustomize built it, ours refused it
    ours-built     kustomize refused it, ours built it
    both-refused   both refused it

Per-class totals and the time each tool took are printed, and every root not `identical` or
`both-refused` is listed with the first difference (or ours' message). The exit status is 1 if
any root is `different`, `ours-refused` or `ours-built` (with --strict-bytes, `same-docs` too).

    python3 tests/kustomize/wild.py CORPUS --kustomize BIN --ours BIN [--jobs N] [--report FILE]
"""

import argparse
import concurrent.futures
import difflib
import os
import re
import subprocess
import sys
import time

import yaml

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
FAILING = ("different", "ours-refused", "ours-built")

# PyYAML reads a bare `=` (a replacement's delimiter, say) as YAML 1.1's value tag and fails;
# go-yaml, as kustomize, reads it as the string "=".
for _loader in (yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    _loader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))
TIMEOUT = 300


def kustomization_file(directory):
    for name in KUSTOMIZATION_FILES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return path
    return None


def is_build_root(path):
    """A kustomize Kustomization (not a Component, not a Flux object)."""
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return False
    if re.search(r"^kind:\s*['\"]?Component\b", text, re.M):
        return False
    if re.search(r"^apiVersion:\s*['\"]?kustomize\.toolkit\.fluxcd\.io/", text, re.M):
        return False
    return True


def build_roots(corpus):
    roots = []
    for repo in sorted(os.listdir(corpus)):
        top = os.path.join(corpus, repo)
        if not os.path.isdir(top):
            continue
        for directory, subdirs, _ in os.walk(top):
            subdirs[:] = sorted(d for d in subdirs if d != ".git")
            path = kustomization_file(directory)
            if path and is_build_root(path):
                roots.append((top, os.path.relpath(directory, top)))
    return roots


def run(command, top, root):
    started = time.monotonic()
    try:
        done = subprocess.run(
            command + [root],
            cwd=top,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=TIMEOUT,
        )
        status, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired:
        status, out, err = -1, b"", b"timed out"
    return status, out, err.decode("utf-8", "replace").strip(), time.monotonic() - started


def documents(text):
    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        return [d for d in yaml.load_all(text, Loader=loader) if d is not None], None
    except yaml.YAMLError as error:
        return None, str(error)


def first_difference(reference, ours):
    diff = difflib.unified_diff(
        reference.decode("utf-8", "replace").splitlines(),
        ours.decode("utf-8", "replace").splitlines(),
        "kustomize",
        "ours",
        n=2,
        lineterm="",
    )
    return "\n".join(list(diff)[:24])


def compare(job):
    top, root, kustomize, ours = job
    k_status, k_out, k_err, k_time = run(kustomize, top, root)
    o_status, o_out, o_err, o_time = run(ours, top, root)
    detail = ""
    if k_status != 0 and o_status != 0:
        verdict = "both-refused"
        detail = "kustomize: " + k_err[-400:] + "\nours: " + o_err[-400:]
    elif k_status != 0:
        verdict, detail = "ours-built", "kustomize: " + k_err[-600:]
    elif o_status != 0:
        verdict, detail = "ours-refused", "ours: " + o_err[-600:]
    elif k_out == o_out:
        verdict = "identical"
    else:
        k_docs, _ = documents(k_out)
        o_docs, o_error = documents(o_out)
        if o_error is not None or k_docs != o_docs:
            verdict = "different"
        else:
            verdict = "same-docs"
        detail = first_difference(k_out, o_out)
    print(f"{verdict:13} {os.path.basename(top)}/{root}", file=sys.stderr, flush=True)
    return {
        "repo": os.path.basename(top),
        "root": root,
        "verdict": verdict,
        "detail": detail,
        "kustomize_seconds": k_time,
        "ours_seconds": o_time,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus")
    parser.add_argument("--kustomize", required=True)
    parser.add_argument("--ours", required=True)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--report", help="write every root's verdict and detail here")
    parser.add_argument("--only", help="only roots whose repo/root matches this regex")
    parser.add_argument("--strict-bytes", action="store_true")
    parser.add_argument(
        "--slowest", type=int, default=5, help="list this many trees that kustomize is slowest on"
    )
    args = parser.parse_args()

    kustomize = [args.kustomize, "build", "--reorder", "none"]
    ours = [args.ours, "build"]
    roots = build_roots(args.corpus)
    if args.only:
        pattern = re.compile(args.only)
        roots = [r for r in roots if pattern.search(os.path.basename(r[0]) + "/" + r[1])]
    if not roots:
        print(f"no kustomization trees under {args.corpus}", file=sys.stderr)
        return 2

    jobs = [(top, root, kustomize, ours) for top, root in roots]
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(compare, jobs))

    totals = {}
    for result in results:
        totals[result["verdict"]] = totals.get(result["verdict"], 0) + 1
    listed = [r for r in results if r["verdict"] not in ("identical", "both-refused")]
    lines = []
    for result in listed:
        lines.append(f"== {result['verdict']}: {result['repo']}/{result['root']}")
        lines.append(result["detail"])
    if args.report:
        with open(args.report, "w") as report:
            for result in results:
                report.write(f"== {result['verdict']}: {result['repo']}/{result['root']}\n")
                report.write(result["detail"] + "\n")
    print("\n".join(lines))

    built = sum(1 for r in results if r["verdict"] not in ("both-refused", "ours-built"))
    k_total = sum(r["kustomize_seconds"] for r in results)
    o_total = sum(r["ours_seconds"] for r in results)
    repos = len({r["repo"] for r in results})
    print(f"\n{len(results)} trees in {repos} repositories; kustomize builds {built}")
    for verdict in ("identical", "same-docs", "different", "ours-refused", "ours-built", "both-refused"):
        print(f"  {verdict:13} {totals.get(verdict, 0)}")
    ratio = o_total / k_total if k_total else 0.0
    print(f"build time: kustomize {k_total:.1f} s, ours {o_total:.1f} s ({ratio:.2f}x)")
    slowest = sorted(results, key=lambda r: r["kustomize_seconds"], reverse=True)
    for result in slowest[: args.slowest]:
        k_time, o_time = result["kustomize_seconds"], result["ours_seconds"]
        print(
            f"  {result['repo']}/{result['root']}: kustomize {k_time:.2f} s, "
            f"ours {o_time:.2f} s ({o_time / k_time:.2f}x)"
        )

    failing = FAILING + (("same-docs",) if args.strict_bytes else ())
    return 1 if any(totals.get(v, 0) for v in failing) else 0


if __name__ == "__main__":
    sys.exit(main())
