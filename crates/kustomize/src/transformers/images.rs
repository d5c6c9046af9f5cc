//! `images:` entries and the `ImageTagTransformer` plugin.

use regex::Regex;
use serde_json::Value;

use super::{Create, FieldSetError, TransformError, apply_spec};
use crate::fieldspec::FieldSpec;
use crate::kustfile::Image;
use crate::resource::{ResMap, Resource};

/// The list fields whose elements' `image` is rewritten wherever they occur.
const CONTAINER_LISTS: [&str; 2] = ["containers", "initContainers"];

/// One `images` entry, ready to apply.
struct ImageRule<'a> {
    image: &'a Image,
    /// `^name(:tag)?(@sha256:digest)?$`, kustomize v5.8.1's pattern (Flux v1.10.1 builds
    /// with it; v5.8.2 also matches other digest algorithms); `None` when `name` is not a
    /// valid regex, which matches nothing (v5.8.1 crashes there, v5.8.2 matches nothing).
    pattern: Option<Regex>,
}

impl<'a> ImageRule<'a> {
    fn new(image: &'a Image) -> Self {
        let pattern = format!(
            "^{}(:[a-zA-Z0-9_.{{}}-]*)?(@sha256:[a-zA-Z0-9_.{{}}-]*)?$",
            image.name
        );
        ImageRule {
            image,
            pattern: crate::goregex::compile(&pattern).ok(),
        }
    }

    fn matches(&self, value: &str) -> bool {
        self.pattern.as_ref().is_some_and(|p| p.is_match(value))
    }

    /// The rewritten reference, or `None` when `value` is not this entry's image.
    fn rewrite(&self, value: &str) -> Option<String> {
        if !self.matches(value) {
            return None;
        }
        let (name, tag, digest) = split_image(value);
        let image = self.image;
        let name = if image.new_name.is_empty() {
            name.to_string()
        } else {
            image.new_name.clone()
        };
        let (tag, digest) = match (image.new_tag.as_str(), image.digest.as_str()) {
            ("", "") if !image.tag_suffix.is_empty() => {
                (format!("{tag}{}", image.tag_suffix), String::new())
            }
            ("", "") => (tag.to_string(), digest.to_string()),
            (new_tag, new_digest) => (new_tag.to_string(), new_digest.to_string()),
        };
        let mut out = name;
        if !tag.is_empty() {
            out.push(':');
            out.push_str(&tag);
        }
        if !digest.is_empty() {
            out.push('@');
            out.push_str(&digest);
        }
        Some(out)
    }

    /// Rewrites an image field in place.
    fn apply(&self, node: &mut Value) -> Result<(), FieldSetError> {
        let text = match node {
            Value::Null => String::new(),
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => return Err(FieldSetError::ImageNotScalar),
        };
        if let Some(new) = self.rewrite(&text) {
            *node = Value::String(new);
        }
        Ok(())
    }
}

/// Splits an image reference into name, tag and digest. A registry host's port (before
/// the first `/`) is not taken for a tag.
pub fn split_image(image: &str) -> (&str, &str, &str) {
    let offset = match image.find('/') {
        Some(i) if i > 0 => i,
        _ => 0,
    };
    let search = &image[offset..];
    let at = search.find('@').map(|i| i + offset);
    let colon = search.find(':').map(|i| i + offset);
    match (colon, at) {
        (None, None) => (image, "", ""),
        (Some(c), Some(a)) if c < a => (&image[..c], &image[c + 1..a], &image[a + 1..]),
        (_, Some(a)) => (&image[..a], "", &image[a + 1..]),
        (Some(c), None) => (&image[..c], &image[c + 1..], ""),
    }
}

/// Applies one `images` entry (kustomize's `ImageTagTransformer`): first to the `image` of
/// every element of every `containers` / `initContainers` list at any depth, then at every
/// field `field_specs` selects (never creating fields). CustomResourceDefinitions are left
/// alone. `name` is a regex anchored as `^name(:tag)?(@digest)?$`; an invalid one matches
/// nothing. `newTag` and `digest` replace both the old tag and digest; `tagSuffix` extends
/// the tag when neither is given.
pub fn set_image(
    resmap: &mut ResMap,
    image: &Image,
    field_specs: &[FieldSpec],
) -> Result<(), TransformError> {
    let rule = ImageRule::new(image);
    for res in resmap.iter_mut() {
        if res.kind() == "CustomResourceDefinition" {
            continue;
        }
        rewrite_container_lists(res, &rule)?;
    }
    for res in resmap.iter_mut() {
        if res.kind() == "CustomResourceDefinition" {
            continue;
        }
        for spec in field_specs {
            apply_spec(res, spec, Create::Nothing, &mut |node| rule.apply(node))?;
        }
    }
    Ok(())
}

/// Applies every `images` entry in order.
pub fn set_images(
    resmap: &mut ResMap,
    images: &[Image],
    field_specs: &[FieldSpec],
) -> Result<(), TransformError> {
    for image in images {
        set_image(resmap, image, field_specs)?;
    }
    Ok(())
}

fn rewrite_container_lists(res: &mut Resource, rule: &ImageRule<'_>) -> Result<(), TransformError> {
    let id = res.id().describe();
    let mut root = Value::Object(std::mem::take(&mut res.obj));
    let result = walk_containers(&mut root, rule);
    if let Value::Object(obj) = root {
        res.obj = obj;
    }
    result.map_err(|source| TransformError::Field {
        id,
        path: "containers[]/image".to_string(),
        source,
    })
}

fn walk_containers(node: &mut Value, rule: &ImageRule<'_>) -> Result<(), FieldSetError> {
    match node {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                walk_containers(value, rule)?;
                if CONTAINER_LISTS.contains(&key.as_str()) {
                    rewrite_list(value, rule)?;
                }
            }
            Ok(())
        }
        Value::Array(items) => items.iter_mut().try_for_each(|i| walk_containers(i, rule)),
        _ => Ok(()),
    }
}

fn rewrite_list(list: &mut Value, rule: &ImageRule<'_>) -> Result<(), FieldSetError> {
    let Value::Array(items) = list else {
        return Ok(());
    };
    for item in items {
        if let Some(image) = item.as_object_mut().and_then(|c| c.get_mut("image")) {
            rule.apply(image)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TransformerConfig;
    use serde_json::json;

    use crate::resource::test_resmap as resmap;

    fn image(name: &str) -> Image {
        Image {
            name: name.to_string(),
            ..Image::default()
        }
    }

    #[test]
    fn splits_references() {
        assert_eq!(split_image("nginx"), ("nginx", "", ""));
        assert_eq!(split_image("nginx:1.2"), ("nginx", "1.2", ""));
        assert_eq!(split_image("nginx@sha256:ab"), ("nginx", "", "sha256:ab"));
        assert_eq!(
            split_image("nginx:1@sha256:ab"),
            ("nginx", "1", "sha256:ab")
        );
        assert_eq!(
            split_image("host:5000/team/app:v1"),
            ("host:5000/team/app", "v1", "")
        );
        assert_eq!(split_image("host:5000/app"), ("host:5000/app", "", ""));
    }

    #[test]
    fn tag_digest_name_and_suffix_rules() {
        let cases = [
            (
                Image {
                    new_tag: "2".into(),
                    ..image("nginx")
                },
                "nginx:1@sha256:aa",
                "nginx:2",
            ),
            (
                Image {
                    digest: "sha256:bb".into(),
                    ..image("nginx")
                },
                "nginx:1",
                "nginx@sha256:bb",
            ),
            (
                Image {
                    new_tag: "2".into(),
                    digest: "sha256:bb".into(),
                    ..image("nginx")
                },
                "nginx",
                "nginx:2@sha256:bb",
            ),
            (
                Image {
                    new_name: "reg/nginx".into(),
                    ..image("nginx")
                },
                "nginx:1",
                "reg/nginx:1",
            ),
            (
                Image {
                    tag_suffix: "-alpine".into(),
                    ..image("redis")
                },
                "redis:6@sha256:aa",
                "redis:6-alpine",
            ),
        ];
        for (entry, input, want) in cases {
            assert_eq!(
                ImageRule::new(&entry).rewrite(input).as_deref(),
                Some(want),
                "{input}"
            );
        }
        let rule_entry = image("nginx");
        let rule = ImageRule::new(&rule_entry);
        assert_eq!(rule.rewrite("my-nginx:1"), None);
        assert_eq!(rule.rewrite("nginx-x"), None);
    }

    #[test]
    fn only_sha256_digests_match_as_in_flux() {
        // kustomize v5.8.1's pattern (Flux v1.10.1); v5.8.2 also takes sha512 and others.
        let entry = Image {
            new_tag: "v2".into(),
            ..image("nginx")
        };
        let rule = ImageRule::new(&entry);
        assert!(rule.matches("nginx@sha256:abc"));
        assert!(rule.matches("nginx:1@sha256:abc"));
        assert!(!rule.matches("nginx@sha512:abc"));
        assert!(!rule.matches("nginx@multihash+base58:abc"));
    }

    #[test]
    fn invalid_name_regex_matches_nothing() {
        let entry = Image {
            new_tag: "v2".into(),
            ..image("[")
        };
        let mut map = resmap(vec![json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}})]);
        set_image(&mut map, &entry, &TransformerConfig::builtin().images).unwrap();
        assert_eq!(
            map.as_slice()[0].obj["spec"]["template"]["spec"]["containers"][0]["image"],
            json!("nginx:1")
        );
    }

    #[test]
    fn any_depth_container_lists_but_not_crds() {
        let entry = Image {
            new_tag: "v2".into(),
            ..image("nginx")
        };
        let mut map = resmap(vec![
            json!({"kind": "Anything", "metadata": {"name": "x"},
                   "spec2": {"deep": {"initContainers": [{"image": "nginx"}, {"name": "no-image"}]}},
                   "spec": {"containers": [{"image": "nginx:1"}, {"image": "other"}]}}),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "metadata": {"name": "c"}, "spec": {"containers": [{"image": "nginx"}]}}),
        ]);
        set_image(&mut map, &entry, &TransformerConfig::builtin().images).unwrap();
        let obj = &map.as_slice()[0].obj;
        assert_eq!(
            obj["spec2"]["deep"]["initContainers"][0]["image"],
            json!("nginx:v2")
        );
        assert_eq!(
            obj["spec2"]["deep"]["initContainers"][1],
            json!({"name": "no-image"})
        );
        assert_eq!(obj["spec"]["containers"][0]["image"], json!("nginx:v2"));
        assert_eq!(obj["spec"]["containers"][1]["image"], json!("other"));
        let crd = &map.as_slice()[1].obj;
        assert_eq!(crd["spec"]["containers"][0]["image"], json!("nginx"));
    }

    #[test]
    fn custom_field_specs_and_image_volumes() {
        let entry = Image {
            new_tag: "foo".into(),
            ..image("solsa-echo")
        };
        let mut map = resmap(vec![
            json!({"apiVersion": "serving.knative.dev/v1alpha1", "kind": "Service",
                   "metadata": {"name": "echo"},
                   "spec": {"runLatest": {"container": {"image": "solsa-echo"}}}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                   "spec": {"volumes": [{"name": "v", "image": {"reference": "solsa-echo:1"}}]}}),
        ]);
        let mut specs = TransformerConfig::builtin().images;
        specs.push(FieldSpec::for_group_kind(
            "serving.knative.dev",
            "Service",
            "spec/runLatest/container/image",
            false,
        ));
        set_image(&mut map, &entry, &specs).unwrap();
        assert_eq!(
            map.as_slice()[0].obj["spec"]["runLatest"]["container"]["image"],
            json!("solsa-echo:foo")
        );
        assert_eq!(
            map.as_slice()[1].obj["spec"]["volumes"][0]["image"]["reference"],
            json!("solsa-echo:foo")
        );
    }

    #[test]
    fn tag_suffix_lands_twice_on_pod_template_containers_like_kustomize() {
        // kustomize runs its any-depth container pass and then the field-spec pass, and
        // the suffixed image still matches the name (kubernetes-sigs/kustomize#4814).
        let entry = Image {
            tag_suffix: "-alpine".into(),
            ..image("redis")
        };
        let mut map = resmap(vec![json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [{"name": "r", "image": "redis:6"}]}}}})]);
        set_image(&mut map, &entry, &TransformerConfig::builtin().images).unwrap();
        assert_eq!(
            map.as_slice()[0].obj["spec"]["template"]["spec"]["containers"][0]["image"],
            json!("redis:6-alpine-alpine")
        );
    }

    #[test]
    fn image_fields_are_never_created() {
        let entry = Image {
            new_tag: "v2".into(),
            ..image("nginx")
        };
        let mut map = resmap(vec![json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p"}, "spec": {}})]);
        set_image(&mut map, &entry, &TransformerConfig::builtin().images).unwrap();
        assert_eq!(map.as_slice()[0].obj["spec"], json!({}));
    }

    #[test]
    fn map_valued_image_is_an_error() {
        let entry = image("nginx");
        let mut map = resmap(vec![json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p"}, "spec": {"containers": [{"image": {"a": 1}}]}})]);
        let err = set_image(&mut map, &entry, &[]).unwrap_err().to_string();
        assert!(err.contains("Pod") && err.contains("image"), "{err}");
    }
}
