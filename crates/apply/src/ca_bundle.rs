//! An invalid conversion webhook `caBundle` stripped from a CustomResourceDefinition before it
//! is applied, as Flux does (fluxcd/pkg ssa `utils.RemoveCABundleFromCRD`): Kubernetes 1.31
//! and later refuse a CRD whose `spec.conversion.webhook.clientConfig.caBundle` holds no
//! certificate, while such bundles (placeholders later filled in by cert-manager's CA
//! injector, for instance) were accepted before.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::Value;

use super::Object;

/// Removes `spec.conversion.webhook.clientConfig.caBundle` from a CRD when it is set, not
/// empty, and not base64 of a PEM bundle with at least one certificate. Other objects, and
/// CRDs with a valid or empty bundle, are left as they are.
pub fn strip_invalid_ca_bundle(object: &mut Object) {
    let crd = object
        .kind()
        .eq_ignore_ascii_case("CustomResourceDefinition")
        && object.api_version().starts_with("apiextensions.k8s.io/");
    if !crd {
        return;
    }
    let Some(client_config) = object
        .as_map_mut()
        .get_mut("spec")
        .and_then(|spec| spec.pointer_mut("/conversion/webhook/clientConfig"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let invalid = match client_config.get("caBundle") {
        Some(Value::String(bundle)) if !bundle.is_empty() => STANDARD
            .decode(bundle)
            .map_or(true, |pem| !holds_a_certificate(&pem)),
        // Flux only reads a string; anything else is left to the API server.
        _ => false,
    };
    if invalid {
        client_config.shift_remove("caBundle");
    }
}

/// Whether a PEM bundle yields at least one certificate, as Go's
/// `CertPool.AppendCertsFromPEM` (which client-go's TLS configuration uses) decides: blocks of
/// other types and certificates that do not parse are skipped.
fn holds_a_certificate(pem: &[u8]) -> bool {
    CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .any(|der| rustls::RootCertStore::empty().add(der).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A self-signed certificate (CN=ca-bundle-test), PEM.
    const CERTIFICATE: &str = include_str!("testdata/ca-bundle-test.pem");

    fn crd(ca_bundle: Value) -> Object {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"caBundle": ca_bundle, "url": "https://hook.example"}}}}
        }))
        .expect("a CRD")
    }

    fn bundle_after(mut object: Object) -> Option<Value> {
        strip_invalid_ca_bundle(&mut object);
        object
            .as_map()
            .get("spec")?
            .pointer("/conversion/webhook/clientConfig/caBundle")
            .cloned()
    }

    #[test]
    fn strips_only_bundles_client_go_would_refuse() {
        let valid = STANDARD.encode(CERTIFICATE);
        let cases = [
            ("a certificate is kept", json!(valid), Some(json!(valid))),
            (
                "a certificate after other blocks is kept",
                json!(STANDARD.encode(format!(
                    "junk\n-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n{CERTIFICATE}"
                ))),
                Some(json!(STANDARD.encode(format!(
                    "junk\n-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n{CERTIFICATE}"
                )))),
            ),
            ("an empty bundle is kept", json!(""), Some(json!(""))),
            (
                "a placeholder is stripped",
                json!(STANDARD.encode("Cg==")),
                None,
            ),
            ("base64 of a newline is stripped", json!("Cg=="), None),
            ("what is not base64 is stripped", json!("not base64!"), None),
            (
                "a CERTIFICATE block that does not parse is stripped",
                json!(STANDARD.encode(
                    "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
                )),
                None,
            ),
            ("a value that is not a string is left", json!(7), Some(json!(7))),
        ];
        for (case, bundle, want) in cases {
            assert_eq!(bundle_after(crd(bundle)), want, "{case}");
        }
    }

    #[test]
    fn other_kinds_are_left_alone() {
        let mut object: Object = serde_json::from_value(json!({
            "apiVersion": "example.com/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "w"},
            "spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": "Cg=="}}}}
        }))
        .expect("an object");
        let before = object.clone();
        strip_invalid_ca_bundle(&mut object);
        assert_eq!(object, before);
    }
}
