//! Kustomization files and resource files come from users' repositories: any text must
//! give a kustomization (or resources, or YAML back) or an error, never a panic.
#![no_main]

use goyaml as yaml;
use kustomize::{kustfile::Kustomization, target};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Kustomization::parse(text, "kustomization.yaml");
        let _ = target::parse_resources(text, "fuzz.yaml");
        if let Ok(docs) = yaml::parse_documents(text) {
            let printed = yaml::to_yaml_stream(&docs);
            let reread = yaml::parse_documents(&printed).expect("printed YAML must parse");
            assert_eq!(docs, reread, "YAML must round-trip");
        }
    }
});
