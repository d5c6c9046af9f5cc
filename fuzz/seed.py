#!/usr/bin/env python3
"""Fills fuzz/corpus/<target>/ with seed inputs taken from the repository's test fixtures and the
kustomize conformance corpus (extracted by tests/kustomize/extract-conformance.sh, or the folder
KC_CONFORMANCE_CORPUS names), plus one small seed of each hostile class. Existing corpus files are kept; seeds are named by content hash.

Usage: fuzz/seed.py            (from anywhere)
"""

import gzip
import hashlib
import io
import os
import pathlib
import subprocess
import tarfile

FUZZ = pathlib.Path(__file__).resolve().parent
REPO = FUZZ.parent
CORPUS = FUZZ / "corpus"
FIXTURES = REPO / "tests" / "fixtures"
KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")


def conformance_corpus():
    """The kustomize conformance corpus: KC_CONFORMANCE_CORPUS, else the extracted one."""
    if os.environ.get("KC_CONFORMANCE_CORPUS"):
        return pathlib.Path(os.environ["KC_CONFORMANCE_CORPUS"])
    script = REPO / "tests" / "kustomize" / "extract-conformance.sh"
    out = subprocess.run(["bash", str(script)], check=True, stdout=subprocess.PIPE, text=True)
    return pathlib.Path(out.stdout.strip().splitlines()[-1])

# The build_tree target's layout (see fuzz_targets/build_tree.rs): a selector byte, then five
# files separated by NUL bytes.
HOSTILE_TREES = [
    (1, [b"", b"", b"", b"", b""]),  # resources: [.]
    (2, [b"", b"", b"", b"resources:\n- ../app\n", b""]),  # app <-> base
    (4, [b"", b"", b"", b"kind: Component\ncomponents:\n- .\n", b""]),  # self component
    (3, [b"", b"kind: ConfigMap\nmetadata: {name: a}\nx: &a [1, 2]\ny: [*a, *a, *a]\n",
         b"kind: ConfigMap\nmetadata: {name: b}\ndata: " + b"[" * 500 + b"]" * 500 + b"\n",
         b"", b""]),
    (5, [b"", b"kind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n",
         b"- op: copy\n  from: /data\n  path: /data/x\n- op: copy\n  from: /data\n  path: /data/y\n",
         b"", b""]),
]

SUBSTITUTE_SEEDS = [
    b"\x01data: ${a} ${u:=x} ${n:-1} ${e:+set} $${escaped}",
    b"\x00${a/abc/x} ${a//d/e} ${a:1:2} ${#a} ${a^^} ${a,,}",
    b"\x01${missing}",
    b"\x00" + b"${a}" * 64,
]


def write(target, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)


def kustomization_dirs(root):
    if not root.is_dir():
        return []
    return sorted({p.parent for name in KUSTOMIZATION_NAMES for p in root.rglob(name)})


def yaml_files(folder):
    return sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml")
                  and p.name not in KUSTOMIZATION_NAMES)


def seed_kustomize():
    for folder in kustomization_dirs(FIXTURES) + kustomization_dirs(conformance_corpus()):
        kustomization = next(folder / n for n in KUSTOMIZATION_NAMES if (folder / n).is_file())
        text = kustomization.read_bytes()
        write("kustomization", text)
        resources = [p.read_bytes() for p in yaml_files(folder)][:2]
        for resource in resources:
            write("parse_manifests", resource)
            write("kustomization", resource)
        files = [text] + resources + [b""] * (4 - len(resources))
        write("build_tree", b"\x00" + b"\x00".join(files[:5]))
    for selector, files in HOSTILE_TREES:
        write("build_tree", bytes([selector]) + b"\x00".join(files))


def seed_patches():
    target = b"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: nginx\n"
    for folder in kustomization_dirs(FIXTURES):
        for path in yaml_files(folder):
            text = path.read_bytes()
            if b"op:" in text or b"$patch" in text or b"patch" in path.name.encode():
                write("patches", target + b"---\n" + text)
    write("patches", target + b"---\n- op: add\n  path: /spec/replicas\n  value: 2\n")
    write("patches", target + b"---\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        $patch: delete\n")


def seed_sops():
    encrypted = FIXTURES / "sops" / "encrypted"
    if encrypted.is_dir():
        # The target's first byte picks the input and output stores (see sops.rs).
        for path in sorted(p for p in encrypted.rglob("*") if p.is_file()):
            for selector in (0, 1, 2, 3, 4):
                write("sops", bytes([selector]) + path.read_bytes())


def seed_substitute():
    for seed in SUBSTITUTE_SEEDS:
        write("substitute", seed)
    for path in sorted(FIXTURES.rglob("*.yaml"))[:50]:
        if b"${" in path.read_bytes():
            write("substitute", b"\x01" + path.read_bytes())


def seed_artifacts():
    trees = {
        "plain": {"deploy/cm.yaml": b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"},
        "nested": {"a/b/c/kustomization.yaml": b"resources: []\n", "a/x.yaml": b"{}\n"},
    }
    for files in trees.values():
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        write("extract_artifact", gzip.compress(buffer.getvalue(), mtime=0))


def main():
    seed_kustomize()
    seed_patches()
    seed_sops()
    seed_substitute()
    seed_artifacts()
    for folder in sorted(CORPUS.iterdir()):
        print("%s: %d inputs" % (folder.name, sum(1 for _ in folder.iterdir())))


if __name__ == "__main__":
    main()
