//! Patches come from users' repositories: any patch text applied to any object must give a
//! patched object or an error, never a panic.
#![no_main]

use kustomize::resource::Gvk;
use goyaml as yaml;
use kustomize::{json6902, smp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The input is "<target YAML>\n---\n<patch YAML>".
    let Ok(docs) = yaml::parse_documents(text) else {
        return;
    };
    let mut docs = docs.into_iter();
    let (Some(serde_json::Value::Object(mut target)), Some(patch)) = (docs.next(), docs.next())
    else {
        return;
    };
    let gvk = Gvk::from_api_version("apps/v1", "Deployment");
    if let serde_json::Value::Object(patch) = &patch {
        let mut merged = target.clone();
        let _ = smp::strategic_merge(&mut merged, patch, &gvk);
    }
    let ops = yaml::to_yaml(&patch);
    let _ = json6902::apply_json6902(&mut target, &ops, "fuzz");
});
