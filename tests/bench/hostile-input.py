#!/usr/bin/env python3
"""Peak memory and time of `kustomize-controller build` on hostile trees, side by side with
the reference `kustomize build` v5.8.2 on the same trees: cycles, YAML alias bombs, a
self-copying JSON 6902 patch, deep nesting, a substitution bomb (ours only: kustomize has no
substitution) and special files.

Usage: tests/bench/hostile-input.py [--ours BINARY] [--kustomize BINARY] [--limit-mib N]

Both run under /usr/bin/time with an address-space limit (default 4096 MiB, so that a bomb
ends instead of swapping the machine); a Markdown table goes to stdout. Defaults:
target/release/kustomize-controller and the cached kustomize of tests/kustomize/.
"""

import argparse
import os
import pathlib
import subprocess
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]


def kustomization(body):
    return "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" + body


def trees():
    """(name, {path: text}, build directory, extra arguments for ours)"""
    alias = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\nanchor: &a \"%s\"\n"
             "data:\n  list: [%s]\n" % ("x" * (1 << 20), ", ".join(["*a"] * 1500)))
    tree = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tree\nl0: &l0 \"%s\"\n" % ("y" * 10000)
    for level in range(1, 13):
        below = level - 1
        tree += "l%d: &l%d [*l%d, *l%d, *l%d, *l%d]\n" % (level, level, below, below, below, below)
    tree += "data:\n  tree: *l12\n"
    ops = "".join("    - {op: copy, from: /data, path: /data/copy%d}\n" % i for i in range(40))
    patch = kustomization("resources: [cm.yaml]\npatches:\n- target: {kind: ConfigMap, name: grow}\n"
                          "  patch: |\n" + ops)
    grow = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: grow\ndata:\n  a: \"0123456789\"\n"
    deep = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n  x: %s%s\n"
            % ("[" * 100000, "]" * 100000))
    subst = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: subst\ndata:\n%s\n"
             % "\n".join("  k%d: \"${big}\"" % i for i in range(2000)))
    return [
        ("cycle: resources [.]", {"k/kustomization.yaml": kustomization("resources: [.]\n")}, "k", []),
        ("cycle: a -> b -> a", {"a/kustomization.yaml": kustomization("resources: [../b]\n"),
                                "b/kustomization.yaml": kustomization("resources: [../a]\n")}, "a", []),
        ("alias: 1 MiB x 1500", {"k/kustomization.yaml": kustomization("resources: [bomb.yaml]\n"),
                                 "k/bomb.yaml": alias}, "k", []),
        ("alias: 4^12 tree of 10 KB", {"k/kustomization.yaml": kustomization("resources: [tree.yaml]\n"),
                                      "k/tree.yaml": tree}, "k", []),
        ("JSON 6902: 40 self-copies", {"k/kustomization.yaml": patch, "k/cm.yaml": grow}, "k", []),
        ("YAML nested 100 000 deep", {"k/kustomization.yaml": kustomization("resources: [deep.yaml]\n"),
                                      "k/deep.yaml": deep}, "k", []),
        ("substitution: 512 KiB x 2000", {"k/kustomization.yaml": kustomization("resources: [cm.yaml]\n"),
                                          "k/cm.yaml": subst, "vars.env": "big=" + "s" * (512 << 10) + "\n"},
         "k", ["--var-file", "{root}/vars.env"]),
        ("resource symlinked to /dev/zero", {"k/kustomization.yaml": kustomization("resources: [zero.yaml]\n"),
                                             "@k/zero.yaml": "/dev/zero"}, "k",
         ["--load-restrictor", "LoadRestrictionsNone"]),
    ]


def run(command, limit_mib):
    script = 'ulimit -v %d; exec /usr/bin/time -f "%%M %%e" "$@" >/dev/null 2>"$TIME_ERR"' % (limit_mib * 1024)
    with tempfile.NamedTemporaryFile() as err:
        env = dict(os.environ, TIME_ERR=err.name)
        started = time.monotonic()
        proc = subprocess.run(["sh", "-c", script, "sh"] + command, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
        wall = time.monotonic() - started
        lines = pathlib.Path(err.name).read_text(errors="replace").strip().splitlines()
    stats = lines[-1].split() if lines else []
    rss = int(stats[0]) / 1024 if len(stats) == 2 and stats[0].isdigit() else None
    message = next((l for l in lines[:-1] if l.strip()), "")[:90]
    if "Command terminated by signal" in " ".join(lines):
        outcome = "killed (%s)" % next(l for l in lines if "signal" in l).split("signal")[-1].strip()
    elif "Command exited with non-zero status" in " ".join(lines):
        outcome = "error"
    else:
        outcome = "built"
    return rss, wall, outcome, message


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ours", default=str(REPO / "target/release/kustomize-controller"))
    parser.add_argument("--kustomize")
    parser.add_argument("--limit-mib", type=int, default=4096)
    args = parser.parse_args()
    kustomize = args.kustomize or subprocess.run(
        ["bash", str(REPO / "tests/kustomize/install-kustomize.sh")],
        check=True, capture_output=True, text=True).stdout.strip()

    print("| input | ours: peak RSS | ours: time | ours: outcome | kustomize v5.8.2: peak RSS | time | outcome |")
    print("|---|---:|---:|---|---:|---:|---|")
    for name, files, directory, extra in trees():
        with tempfile.TemporaryDirectory() as root:
            for path, text in files.items():
                target = pathlib.Path(root, path.lstrip("@"))
                target.parent.mkdir(parents=True, exist_ok=True)
                if path.startswith("@"):
                    target.symlink_to(text)
                else:
                    target.write_text(text)
            build_dir = str(pathlib.Path(root, directory))
            ours = run([args.ours, "build", build_dir] + [a.format(root=root) for a in extra], args.limit_mib)
            cells = ["%.0f MiB" % ours[0] if ours[0] else "-", "%.2f s" % ours[1], ours[2]]
            if name.startswith("substitution"):
                cells += ["n/a", "n/a", "no substitution in kustomize"]
            else:
                ref = run([kustomize, "build", "--load-restrictor", "LoadRestrictionsNone", build_dir],
                          args.limit_mib)
                cells += ["%.0f MiB" % ref[0] if ref[0] else "-", "%.2f s" % ref[1], ref[2]]
            print("| %s | %s |" % (name, " | ".join(cells)))


if __name__ == "__main__":
    main()
