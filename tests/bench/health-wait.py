#!/usr/bin/env python3
"""Health-check benchmark: N Kustomizations with `wait: true`, each one Deployment of 2 replicas
rolled out on kwok's fake nodes, applied by this controller and by Flux's kustomize-controller
one after the other on the same local cluster (tests/controlplane/up.sh).

Measures, per implementation:
- create N Kustomizations -> all Ready=True (seconds);
- per Kustomization, the gap between its last pod turning Ready and its Ready turning True,
  from the receive times of `kubectl get --watch` events (median, p90, max);
- the controller's peak RSS (VmHWM) and CPU time.

Usage: tests/bench/health-wait.py [--kustomizations N] [--implementations ours,flux]
                                  [--ours PATH] [--flux PATH] [--kubeconfig PATH]
Defaults: N=100, our release binary (target/release/kustomize-controller, built with
`cargo build --release` first), Flux's from tests/bench/install-flux-controller.sh, the
cluster of .controlplane/ (started or reused by tests/controlplane/up.sh).
Both controllers run with the same flags (`--concurrent=4`, default API limits) and watch only
this run's objects (`--watch-label-selector`).
"""
import argparse
import hashlib
import http.server
import io
import json
import os
import socketserver
import statistics
import subprocess
import sys
import tarfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMESPACES = 10


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kustomizations", type=int, default=100)
    parser.add_argument("--implementations", default="ours,flux")
    parser.add_argument("--ours", default=os.path.join(REPO, "target/release/kustomize-controller"))
    parser.add_argument("--flux", default=None)
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per implementation")
    return parser.parse_args()


class Cluster:
    def __init__(self, kubeconfig):
        self.kubeconfig = kubeconfig
        self.kubectl = [os.path.join(os.path.dirname(kubeconfig), "bin", "kubectl"), "--kubeconfig", kubeconfig]

    def run(self, args, stdin=None, check=True):
        return subprocess.run(self.kubectl + args, input=stdin, capture_output=True, text=True, check=check).stdout

    def apply(self, objects):
        self.run(["apply", "-f", "-"], json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


def deployment(namespace, name, run):
    return f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {namespace}
spec:
  replicas: 2
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
        kc-bench/run: {run}
    spec:
      containers:
      - name: app
        image: registry.example/{name}:1
"""


class Artifacts:
    """Serves one tarball per namespace over HTTP, as source-controller would."""

    def __init__(self):
        self.files = {}
        files = self.files

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = files.get(self.path)
                if body is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def publish(self, name, entries):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for path, text in entries:
                data = text.encode()
                info = tarfile.TarInfo(path)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        body = buf.getvalue()
        self.files[f"/{name}.tar.gz"] = body
        url = f"http://127.0.0.1:{self.server.server_address[1]}/{name}.tar.gz"
        return url, "sha256:" + hashlib.sha256(body).hexdigest(), len(body)


class Watcher:
    """Receive times of pods and Kustomizations turning Ready, from `kubectl get --watch`."""

    def __init__(self, cluster, run):
        self.pods = {}  # (namespace, app) -> {pod: time}
        self.kustomizations = {}  # (namespace, name) -> time
        self.lock = threading.Lock()
        self.processes = []
        for resource, record in (("pods", self._pod), ("kustomizations.kustomize.toolkit.fluxcd.io", self._ks)):
            process = subprocess.Popen(
                cluster.kubectl + ["get", resource, "-A", "-l", f"kc-bench/run={run}", "--watch",
                                   "--output-watch-events", "-o", "json"],
                stdout=subprocess.PIPE, text=True)
            self.processes.append(process)
            threading.Thread(target=self._read, args=(process, record), daemon=True).start()

    def _read(self, process, record):
        decoder, buf = json.JSONDecoder(), ""
        for line in process.stdout:
            buf += line
            try:
                event, _ = decoder.raw_decode(buf.strip())
            except ValueError:
                continue
            buf = ""
            now = time.time()
            obj = event.get("object", {})
            conditions = (obj.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                with self.lock:
                    record(obj.get("metadata", {}), now)

    def _pod(self, metadata, now):
        key = (metadata.get("namespace"), (metadata.get("labels") or {}).get("app"))
        self.pods.setdefault(key, {}).setdefault(metadata.get("name"), now)

    def _ks(self, metadata, now):
        self.kustomizations.setdefault((metadata.get("namespace"), metadata.get("name")), now)

    def ready_count(self):
        with self.lock:
            return len(self.kustomizations)

    def stop(self):
        for process in self.processes:
            process.terminate()


def proc_stats(pid):
    rss_kib, cpu = None, None
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM"):
                rss_kib = int(line.split()[1])
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return rss_kib, cpu


def measure(cluster, artifacts, name, binary, n, timeout):
    run = f"hw-{name}-{int(time.time())}"
    namespaces = [f"{run}-{i}" for i in range(NAMESPACES)]
    apps = {ns: [f"app-{i}" for i in range(n) if i % NAMESPACES == k] for k, ns in enumerate(namespaces)}
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces])
    for ns in namespaces:
        url, digest, size = artifacts.publish(ns, [(f"{app}/deployment.yaml", deployment(ns, app, run)) for app in apps[ns]])
        cluster.apply([{"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
                        "metadata": {"name": "repo", "namespace": ns, "labels": {"kc-bench/run": run}},
                        "spec": {"url": "https://example.invalid/repo.git", "interval": "60m"}}])
        status = {"status": {"artifact": {"path": f"{ns}.tar.gz", "url": url, "revision": "main@sha1:" + "1" * 40,
                                          "digest": digest, "lastUpdateTime": "2026-01-01T00:00:00Z", "size": size}}}
        cluster.run(["patch", "gitrepository", "repo", "-n", ns, "--subresource=status", "--type=merge",
                     "-p", json.dumps(status)])
    watcher = Watcher(cluster, run)
    log_path = os.path.join(REPO, "target", f"bench-health-wait-{run}.log")
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "w") as log:
        controller = subprocess.Popen(
            [binary, "--watch-all-namespaces=true", "--concurrent=4", "--log-level=info", "--log-encoding=json",
             "--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0", "--events-addr=",
             "--enable-leader-election=false", f"--watch-label-selector=kc-bench/run={run}"],
            stdout=log, stderr=log, env=dict(os.environ, RUNTIME_NAMESPACE="flux-system", KUBECONFIG=cluster.kubeconfig))
    time.sleep(3)
    kustomizations = [{"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                       "metadata": {"name": app, "namespace": ns, "labels": {"kc-bench/run": run}},
                       "spec": {"interval": "60m", "prune": True, "wait": True, "timeout": "30m", "path": f"./{app}",
                                "sourceRef": {"kind": "GitRepository", "name": "repo"}}}
                      for ns in namespaces for app in apps[ns]]
    started = time.time()
    cluster.apply(kustomizations)
    deadline = started + timeout
    while watcher.ready_count() < n and time.time() < deadline:
        time.sleep(0.1)
    rss_kib, cpu = proc_stats(controller.pid)
    controller.terminate()
    controller.wait()
    watcher.stop()
    with watcher.lock:
        ready = dict(watcher.kustomizations)
        gaps = sorted(t - max(watcher.pods[key].values()) for key, t in ready.items()
                      if len(watcher.pods.get(key, {})) >= 2)
    result = {
        "implementation": name,
        "kustomizations": n,
        "ready": len(ready),
        "create_to_all_ready_s": round(max(ready.values()) - started, 2) if len(ready) == n else None,
        "gap_median_s": round(statistics.median(gaps), 3) if gaps else None,
        "gap_p90_s": round(gaps[min(len(gaps) - 1, int(0.9 * len(gaps)))], 3) if gaps else None,
        "gap_max_s": round(gaps[-1], 3) if gaps else None,
        "peak_rss_mib": round(rss_kib / 1024, 1) if rss_kib else None,
        "cpu_s": cpu,
        "log": log_path,
    }
    # The controller is gone: release the finalizers, then delete and wait for the namespaces,
    # so that the next implementation starts on a quiet cluster.
    for ns in namespaces:
        for app in apps[ns]:
            cluster.run(["patch", "kustomization", app, "-n", ns, "--type=merge",
                         "-p", '{"metadata":{"finalizers":null}}'], check=False)
    cluster.run(["delete", "namespace", *namespaces, "--wait=true", "--timeout=600s"], check=False)
    return result


def main():
    args = parse_args()
    kubeconfig = args.kubeconfig or subprocess.run(
        ["bash", os.path.join(REPO, "tests/controlplane/up.sh")], capture_output=True, text=True, check=True).stdout.strip()
    cluster = Cluster(kubeconfig)
    artifacts = Artifacts()
    results = []
    for name in args.implementations.split(","):
        if name == "ours":
            binary = args.ours
        else:
            binary = args.flux or subprocess.run(
                ["bash", os.path.join(REPO, "tests/bench/install-flux-controller.sh")],
                capture_output=True, text=True, check=True).stdout.strip()
        result = measure(cluster, artifacts, name, binary, args.kustomizations, args.timeout)
        print(json.dumps(result), flush=True)
        results.append(result)
    if len(results) == 2 and all(r["create_to_all_ready_s"] for r in results):
        ours, flux = results
        print(f"create {args.kustomizations} -> all Ready: ours {ours['create_to_all_ready_s']} s, "
              f"Flux {flux['create_to_all_ready_s']} s, ours/Flux {ours['create_to_all_ready_s'] / flux['create_to_all_ready_s']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
