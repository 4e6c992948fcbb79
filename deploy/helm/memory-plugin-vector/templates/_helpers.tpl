{{/* Chart name, overridable. */}}
{{- define "mpv.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name; the release name alone when it already contains the chart name. */}}
{{- define "mpv.fullname" -}}
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

{{/* Labels that select the plugin's pods (Service, PDB, NetworkPolicy, ServiceMonitor). */}}
{{- define "mpv.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mpv.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end }}

{{/* Release bookkeeping labels; every object has them. */}}
{{- define "mpv.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Recommended labels on every object except the test pod. */}}
{{- define "mpv.labels" -}}
{{ include "mpv.commonLabels" . }}
{{ include "mpv.selectorLabels" . }}
{{- end }}

{{/* Labels of the `helm test` pod; the NetworkPolicy admits pods carrying them. */}}
{{- define "mpv.testSelectorLabels" -}}
app.kubernetes.io/name: {{ include "mpv.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: helm-test
{{- end }}

{{- define "mpv.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mpv.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "mpv.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "mpv.pvcName" -}}
{{- default (printf "%s-data" (include "mpv.fullname" .)) .Values.embedded.persistence.existingClaim }}
{{- end }}

{{/* Pod-level security settings shared by the server and the test pod. */}}
{{- define "mpv.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext }}
{{- end }}

{{- define "mpv.containerSecurityContext" -}}
{{- toYaml .Values.containerSecurityContext }}
{{- end }}

{{/*
Combinations the schema cannot express. Included by every manifest that
depends on them, so `helm template` and `helm install` fail before anything
is applied.
*/}}
{{- define "mpv.validate" -}}
{{- $v := .Values }}
{{- if eq $v.backend "embedded" }}
{{- if gt (int $v.replicaCount) 1 }}
{{- fail (printf "backend \"embedded\" keeps its data on one volume with a single writer: replicaCount must be 1, not %d (use backend \"qdrant\" to scale out)" (int $v.replicaCount)) }}
{{- end }}
{{- if $v.autoscaling.enabled }}
{{- fail "backend \"embedded\" keeps its data on one volume with a single writer: autoscaling.enabled must be false" }}
{{- end }}
{{- end }}
{{- if and (eq $v.backend "qdrant") (not $v.qdrant.url) }}
{{- fail "backend \"qdrant\" needs qdrant.url (e.g. http://qdrant.qdrant.svc.cluster.local:6333); for the embedded store use backend \"embedded\"" }}
{{- end }}
{{- if eq $v.backend "pinecone" }}
{{- if not $v.pinecone.apiKeySecret.name }}
{{- fail "backend \"pinecone\" needs pinecone.apiKeySecret.name: an existing Secret holding the API key" }}
{{- end }}
{{- if not (or $v.pinecone.index $v.pinecone.host) }}
{{- fail "backend \"pinecone\" needs pinecone.index or pinecone.host" }}
{{- end }}
{{- end }}
{{- if and $v.autoscaling.enabled (gt (int $v.autoscaling.minReplicas) (int $v.autoscaling.maxReplicas)) }}
{{- fail "autoscaling.minReplicas must not exceed autoscaling.maxReplicas" }}
{{- end }}
{{- $platformPods := $v.networkPolicy.platform.podSelector }}
{{- if and $v.networkPolicy.enabled (not (or $platformPods.matchLabels $platformPods.matchExpressions)) }}
{{- fail "networkPolicy.platform.podSelector must select the platform's pods (matchLabels or matchExpressions); an empty selector would admit every pod" }}
{{- end }}
{{- if lt (int $v.terminationGracePeriodSeconds) (add (int $v.preStopSleepSeconds) 10) }}
{{- fail "terminationGracePeriodSeconds must leave preStopSleepSeconds plus the server's 10 s drain" }}
{{- end }}
{{- $pdb := $v.podDisruptionBudget }}
{{- if and $pdb.enabled (eq (kindOf $pdb.maxUnavailable) "invalid") (eq (kindOf $pdb.minAvailable) "invalid") }}
{{- fail "podDisruptionBudget needs maxUnavailable or minAvailable" }}
{{- end }}
{{- if and $pdb.enabled (ne (kindOf $pdb.maxUnavailable) "invalid") (ne (kindOf $pdb.minAvailable) "invalid") }}
{{- fail "podDisruptionBudget takes maxUnavailable or minAvailable, not both: set the other to null" }}
{{- end }}
{{- $envNames := dict }}
{{- range $v.extraEnv }}
{{- if hasKey $envNames .name }}
{{- fail (printf "extraEnv names %s twice" .name) }}
{{- end }}
{{- $_ := set $envNames .name true }}
{{- end }}
{{- range $v.extraVolumes }}
{{- if has .name (list "tmp" "data") }}
{{- fail (printf "extraVolumes: %q is the chart's own volume; give yours another name" .name) }}
{{- end }}
{{- end }}
{{- range $v.extraVolumeMounts }}
{{- if has (trimSuffix "/" .mountPath) (list "/tmp" "/data") }}
{{- fail (printf "extraVolumeMounts: %s is the chart's own mount; mount yours elsewhere" .mountPath) }}
{{- end }}
{{- end }}
{{- end }}
