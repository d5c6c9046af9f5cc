//! Writes the benchmark's kustomization tree: a base of `apps` applications (8 objects each), a
//! component and a production overlay on top. Deterministic: the same `apps` gives the same
//! files, byte for byte.
//!
//! ```text
//! <root>/base/kustomization.yaml                 resources: apps/app-0000 ... apps/app-NNNN
//! <root>/base/apps/app-NNNN/                     kustomization.yaml (labels, configMapGenerator),
//!                                                deployment.yaml, service.yaml, rbac.yaml
//!                                                (ServiceAccount, Role, RoleBinding),
//!                                                autoscaling.yaml, ingress.yaml, app.properties
//! <root>/components/monitoring/                  Component: configMapGenerator, annotations, a
//!                                                sidecar patch for Deployments labelled tier=web
//! <root>/overlays/production/                    the build target: namespace, namePrefix,
//!                                                commonLabels, images, replicas, a merging
//!                                                configMapGenerator, label-selected strategic-merge
//!                                                patches and a JSON 6902 patch
//! ```

use std::path::{Path, PathBuf};

/// Objects each application contributes: Deployment, Service, ConfigMap, ServiceAccount, Role,
/// RoleBinding, HorizontalPodAutoscaler, Ingress.
pub const OBJECTS_PER_APP: usize = 8;

/// Objects the component and overlay add on top of the applications (the component's ConfigMap).
pub const EXTRA_OBJECTS: usize = 1;

/// How many applications the overlay's `images:` and `replicas:` name (at most).
const OVERRIDDEN_APPS: usize = 20;

/// Tiers in turn; the overlay's and component's patches select by tier.
const TIERS: [&str; 3] = ["web", "backend", "worker"];

/// The generated tree.
pub struct Tree {
    /// The directory to build (`<root>/overlays/production`).
    pub build_dir: PathBuf,
    /// How many objects `kustomize build` must print.
    pub expected_objects: usize,
    /// How many files were written.
    pub files: usize,
}

/// Writes the tree under `root` (which must exist) and describes it.
pub fn generate(root: &Path, apps: usize) -> Tree {
    let mut writer = Writer { root, files: 0 };
    for index in 0..apps {
        write_app(&mut writer, index);
    }
    writer.write("base/kustomization.yaml", &base_kustomization(apps));
    write_component(&mut writer);
    write_overlay(&mut writer, apps);
    Tree {
        build_dir: root.join("overlays/production"),
        expected_objects: apps * OBJECTS_PER_APP + EXTRA_OBJECTS,
        files: writer.files,
    }
}

/// Writes files relative to the root, creating directories on the way.
struct Writer<'a> {
    root: &'a Path,
    files: usize,
}

impl Writer<'_> {
    fn write(&mut self, relative: &str, text: &str) {
        let path = self.root.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .unwrap_or_else(|e| panic!("create {}: {e}", parent.display()));
        }
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        self.files += 1;
    }
}

/// `app-0042`.
fn app_name(index: usize) -> String {
    format!("app-{index:04}")
}

fn tier(index: usize) -> &'static str {
    TIERS[index % TIERS.len()]
}

fn team(index: usize) -> usize {
    index % 10
}

/// The container image of an application, before the overlay's `images:`.
fn image(index: usize) -> String {
    format!(
        "registry.example.com/team-{}/{}",
        team(index),
        app_name(index)
    )
}

fn base_kustomization(apps: usize) -> String {
    let mut text = String::from(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n",
    );
    for index in 0..apps {
        text.push_str(&format!("- apps/{}\n", app_name(index)));
    }
    text
}

fn write_app(writer: &mut Writer, index: usize) {
    let name = app_name(index);
    let dir = format!("base/apps/{name}");
    writer.write(
        &format!("{dir}/kustomization.yaml"),
        &app_kustomization(index),
    );
    writer.write(&format!("{dir}/deployment.yaml"), &deployment(index));
    writer.write(&format!("{dir}/service.yaml"), &service(index));
    writer.write(&format!("{dir}/rbac.yaml"), &rbac(index));
    writer.write(&format!("{dir}/autoscaling.yaml"), &autoscaler(index));
    writer.write(&format!("{dir}/ingress.yaml"), &ingress(index));
    writer.write(&format!("{dir}/app.properties"), &properties(index));
}

fn app_kustomization(index: usize) -> String {
    let name = app_name(index);
    let team = team(index);
    format!(
        r#"apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
labels:
- pairs:
    app.kubernetes.io/name: {name}
  includeSelectors: true
- pairs:
    team: team-{team}
resources:
- deployment.yaml
- service.yaml
- rbac.yaml
- autoscaling.yaml
- ingress.yaml
configMapGenerator:
- name: {name}-config
  literals:
  - LOG_LEVEL=info
  - TEAM=team-{team}
  - LISTEN_PORT=8080
  files:
  - app.properties
"#
    )
}

fn properties(index: usize) -> String {
    let mut text = format!("# {} settings\n", app_name(index));
    for key in 0..12 {
        text.push_str(&format!(
            "setting.{key}=value-{}-{key}\n",
            (index * 31 + key * 7) % 1000
        ));
    }
    text
}

fn deployment(index: usize) -> String {
    let name = app_name(index);
    let tier = tier(index);
    let image = image(index);
    let replicas = 1 + index % 3;
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels:
    tier: {tier}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
        tier: {tier}
    spec:
      serviceAccountName: {name}
      containers:
      - name: app
        image: {image}:1.0.{index}
        args:
        - --config=/etc/app/app.properties
        - --port=8080
        ports:
        - name: http
          containerPort: 8080
        envFrom:
        - configMapRef:
            name: {name}-config
        env:
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: LOG_FORMAT
          value: json
        readinessProbe:
          httpGet:
            path: /healthz
            port: http
          periodSeconds: 10
        resources:
          requests:
            cpu: 100m
            memory: 128Mi
        volumeMounts:
        - name: config
          mountPath: /etc/app
          readOnly: true
      volumes:
      - name: config
        configMap:
          name: {name}-config
"#
    )
}

fn service(index: usize) -> String {
    let name = app_name(index);
    let tier = tier(index);
    format!(
        r#"apiVersion: v1
kind: Service
metadata:
  name: {name}
  labels:
    tier: {tier}
spec:
  selector:
    app: {name}
  ports:
  - name: http
    port: 80
    targetPort: http
"#
    )
}

fn rbac(index: usize) -> String {
    let name = app_name(index);
    format!(
        r#"apiVersion: v1
kind: ServiceAccount
metadata:
  name: {name}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {name}
rules:
- apiGroups:
  - ""
  resources:
  - configmaps
  resourceNames:
  - {name}-config
  verbs:
  - get
  - watch
- apiGroups:
  - coordination.k8s.io
  resources:
  - leases
  verbs:
  - get
  - create
  - update
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {name}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {name}
subjects:
- kind: ServiceAccount
  name: {name}
  namespace: default
- kind: ServiceAccount
  name: default
  namespace: default
"#
    )
}

fn autoscaler(index: usize) -> String {
    let name = app_name(index);
    let max = 4 + index % 6;
    format!(
        r#"apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {name}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {name}
  minReplicas: 1
  maxReplicas: {max}
  metrics:
  - type: Resource
    resource:
      name: cpu
      target:
        type: Utilization
        averageUtilization: 75
"#
    )
}

fn ingress(index: usize) -> String {
    let name = app_name(index);
    format!(
        r#"apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {name}
  annotations:
    nginx.ingress.kubernetes.io/proxy-body-size: 8m
spec:
  ingressClassName: internal
  rules:
  - host: {name}.apps.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: {name}
            port:
              name: http
  tls:
  - hosts:
    - {name}.apps.example.com
    secretName: {name}-tls
"#
    )
}

fn write_component(writer: &mut Writer) {
    writer.write(
        "components/monitoring/kustomization.yaml",
        r#"apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
configMapGenerator:
- name: monitoring-config
  literals:
  - SCRAPE_INTERVAL=30s
  - METRICS_PATH=/metrics
commonAnnotations:
  monitoring.example.com/enabled: "true"
patches:
- path: sidecar.yaml
  target:
    kind: Deployment
    labelSelector: tier=web
"#,
    );
    writer.write(
        "components/monitoring/sidecar.yaml",
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: any
  annotations:
    prometheus.io/scrape: "true"
    prometheus.io/port: "9102"
spec:
  template:
    spec:
      containers:
      - name: metrics-exporter
        image: prom/statsd-exporter:v0.26.0
        ports:
        - name: metrics
          containerPort: 9102
        envFrom:
        - configMapRef:
            name: monitoring-config
"#,
    );
}

fn write_overlay(writer: &mut Writer, apps: usize) {
    writer.write(
        "overlays/production/kustomization.yaml",
        &overlay_kustomization(apps),
    );
    writer.write(
        "overlays/production/backend-resources.yaml",
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: any
spec:
  template:
    spec:
      containers:
      - name: app
        env:
        - name: GOMAXPROCS
          value: "2"
        resources:
          limits:
            cpu: "2"
            memory: 1Gi
"#,
    );
    writer.write(
        "overlays/production/ingress-class.yaml",
        r#"- op: replace
  path: /spec/ingressClassName
  value: public
- op: add
  path: /metadata/annotations/cert-manager.io~1cluster-issuer
  value: letsencrypt
"#,
    );
}

fn overlay_kustomization(apps: usize) -> String {
    let mut text = String::from(
        r#"apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../../base
components:
- ../../components/monitoring
namespace: production
namePrefix: prod-
commonLabels:
  env: production
configMapGenerator:
- name: app-0000-config
  behavior: merge
  literals:
  - LOG_LEVEL=warn
patches:
- path: backend-resources.yaml
  target:
    kind: Deployment
    labelSelector: tier=backend
- path: ingress-class.yaml
  target:
    group: networking.k8s.io
    version: v1
    kind: Ingress
- patch: |-
    apiVersion: v1
    kind: Service
    metadata:
      name: any
      annotations:
        service.example.com/exposed: "true"
  target:
    kind: Service
    labelSelector: tier in (web)
images:
- name: prom/statsd-exporter
  newName: registry.example.com/mirror/statsd-exporter
  newTag: v0.27.1
"#,
    );
    let overridden = apps.min(OVERRIDDEN_APPS);
    for index in 0..overridden {
        text.push_str(&format!(
            "- name: {}\n  newTag: 2.0.{index}\n",
            image(index)
        ));
    }
    text.push_str("replicas:\n");
    for index in 0..overridden {
        text.push_str(&format!(
            "- name: {}\n  count: {}\n",
            app_name(index),
            3 + index % 4
        ));
    }
    text
}
