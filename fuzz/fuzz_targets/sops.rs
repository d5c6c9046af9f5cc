//! SOPS files come from Git: any bytes, in any store, must decrypt or fail with an error,
//! never panic. The keyring holds a real test identity, so inputs derived from the fixtures
//! reach the cipher, the MAC and the emitters, not only the parsers.
#![no_main]

use std::sync::OnceLock;

use sops::{Format, Keyring};
use libfuzzer_sys::fuzz_target;

fn keys() -> &'static Keyring {
    static KEYS: OnceLock<Keyring> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut keys = Keyring::new();
        let identity = include_str!("../../tests/fixtures/sops/keys/age-1.agekey");
        keys.import_age(identity).expect("test identity");
        keys
    })
}

const FORMATS: [Format; 5] = [Format::Yaml, Format::Json, Format::Dotenv, Format::Ini, Format::Binary];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let input = FORMATS[usize::from(selector) % FORMATS.len()];
    let output = FORMATS[usize::from(selector / 5) % FORMATS.len()];
    let _ = sops::decrypt(rest, input, output, keys(), selector & 0x80 != 0);
    if let Ok(serde_json::Value::Object(object)) = serde_json::from_slice(rest) {
        let _ = sops::decrypt_object(&object, keys());
    }
});
