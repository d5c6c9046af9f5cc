{{/*
Chart name.
*/}}
{{- define "kustomize-controller.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: the release name when it already contains the chart name (so that
`helm install kustomize-controller ...` gives objects named kustomize-controller, as Flux's).
*/}}
{{- define "kustomize-controller.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kustomize-controller.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Selector labels (immutable once the Deployment exists).
*/}}
{{- define "kustomize-controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kustomize-controller.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Selector labels of one Deployment, given (list $ $instance): a shard's pods are named after
the shard, so that the main Deployment's selector never matches them.
*/}}
{{- define "kustomize-controller.instanceSelectorLabels" -}}
{{- $root := index . 0 -}}
{{- $instance := index . 1 -}}
app.kubernetes.io/name: {{ include "kustomize-controller.name" $root }}{{ $instance.suffix }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
{{- end }}

{{/*
Common labels.
*/}}
{{- define "kustomize-controller.labels" -}}
helm.sh/chart: {{ include "kustomize-controller.chart" . }}
{{ include "kustomize-controller.selectorLabels" . }}
app.kubernetes.io/component: kustomize-controller
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
ServiceAccount name.
*/}}
{{- define "kustomize-controller.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kustomize-controller.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Container image.
*/}}
{{- define "kustomize-controller.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion (toString .Values.image.tag)) }}
{{- end }}

{{/*
Controller arguments, in the order Flux's Deployment passes them.
*/}}
{{- define "kustomize-controller.args" -}}
{{- $eventsAddr := tpl (toString .Values.eventsAddr) . }}
{{- if $eventsAddr }}
- --events-addr={{ $eventsAddr }}
{{- end }}
- --watch-all-namespaces={{ .Values.watchAllNamespaces }}
- --log-level={{ .Values.logLevel }}
- --log-encoding={{ .Values.logEncoding }}
{{- if .Values.leaderElection }}
- --enable-leader-election
{{- end }}
- --concurrent={{ .Values.concurrent }}
- --metrics-addr=:{{ .Values.metricsPort }}
- --health-addr=:{{ .Values.healthPort }}
{{- with .Values.featureGates }}
{{- $gates := list }}
{{- range $name, $enabled := . }}
{{- $gates = append $gates (printf "%s=%t" $name $enabled) }}
{{- end }}
- --feature-gates={{ join "," $gates }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . }}
{{- end }}
{{- end }}
