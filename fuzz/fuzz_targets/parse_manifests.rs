//! Manifests come from users' repositories: any text must give objects or an error.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = kustomize::target::parse_resources(text, "fuzz.yaml");
    }
});
