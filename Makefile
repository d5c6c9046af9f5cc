# Developer entry points. `make demo` and `make test` are the README's two commands.

CRD := crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml
CRD_COPIES := config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml \
              charts/kustomize-controller/crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml

.PHONY: build crds demo demo-down test test-fresh-clone kustomize-diff kustomize-wild conformance lint fuzz controlplane-up controlplane-down

build:
	cargo build --release --locked

# Regenerates the CRD from the Rust types, and its copies in config/ and charts/.
crds:
	cargo run --quiet --locked -- crd > $(CRD)
	for copy in $(CRD_COPIES); do cp $(CRD) $$copy; done

# Brings up a local control plane, runs the controller (left running in the background) on
# config/samples/demo, and waits until the Kustomization is Ready at the manifests' revision.
# Run it again after editing config/samples/demo/manifests to publish and apply the change.
demo:
	bash tests/controlplane/demo.sh

# Stops the demo's controller, then the control plane, source-controller and the Git server.
demo-down:
	bash tests/controlplane/demo.sh down

# Every test: unit, integration, end-to-end and the kustomize conformance corpus, against a
# local control plane that this target starts and stops again. The first run builds the peers
# the tests compare with (cached outside the repository) beside the Rust build.
test:
	bash tests/run.sh

# `make test` in a clone of HEAD in an empty temporary directory, timed; COLD=1 starts every
# cache empty as well (what a newcomer's first run costs), DEMO=1 runs `make demo` first.
test-fresh-clone:
	bash tests/fresh-clone.sh $(if $(COLD),--cold) $(if $(DEMO),--demo)

# Only the differential tests: `kustomize-controller build` against the real kustomize v5.8 on
# every fixture in tests/fixtures/kustomize (builds kustomize on first use), with the
# informational byte-for-byte reports shown. KC_DIFF_OURS="kustomize build --reorder none"
# checks the harness itself.
kustomize-diff:
	KC_DIFF_KUSTOMIZE="$$(bash tests/kustomize/install-kustomize.sh)" \
	  cargo test --locked --test kustomize_differential -- --nocapture --test-threads=1

# Builds every kustomization tree of a real-world corpus (WILD_CORPUS: a folder of repository
# trees, as tests/kustomize/wild-collect.py makes it) with ours and with kustomize v5.8, and
# prints per-class totals, build times and every tree that differs.
kustomize-wild:
	@test -n "$(WILD_CORPUS)" || { echo "kustomize-wild: set WILD_CORPUS to a folder of repository trees (tests/kustomize/wild-collect.py makes one)" >&2; exit 1; }
	cargo build --release --locked --bin kustomize-controller
	python3 tests/kustomize/wild.py "$(WILD_CORPUS)" --jobs "$$(nproc)" \
	  --kustomize "$$(bash tests/kustomize/install-kustomize.sh)" \
	  --ours target/release/kustomize-controller --report target/kustomize-wild.txt

# Scores the kustomize engine on every build of kustomize's own krusty tests (extracted on first
# use by tests/kustomize/extract-conformance.sh) and fails on a regression against
# tests/kustomize/conformance-passing.txt. Part of `make test`; this target shows every case that
# does not pass. KC_CONFORMANCE_UPDATE=1 rewrites the list.
conformance:
	KC_CONFORMANCE_VERBOSE=1 cargo test --locked --test kustomize_conformance -- --nocapture

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	cargo clippy --workspace --lib --bins --locked -- -D warnings -D clippy::unwrap_used

# Every fuzz target in turn, FUZZ_SECONDS each (default 600), from the seeds of fuzz/seed.py.
# Needs nightly Rust and cargo-fuzz (`cargo install cargo-fuzz`). Not part of `make test`.
FUZZ_SECONDS ?= 600
fuzz:
	python3 fuzz/seed.py
	cd fuzz && for target in $$(cargo +nightly fuzz list); do \
	  cargo +nightly fuzz run $$target -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=25 || exit 1; \
	done

controlplane-up:
	bash tests/controlplane/up.sh

controlplane-down:
	bash tests/controlplane/down.sh
