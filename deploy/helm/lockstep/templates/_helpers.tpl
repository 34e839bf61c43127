{{/* Names: <release> if it contains the chart name, else <release>-lockstep (63-character limit). */}}
{{- define "lockstep.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A component's object name: <fullname>-<component> (node, power, analytics, fabric, switch, storage). */}}
{{- define "lockstep.componentName" -}}
{{- printf "%s-%s" (include "lockstep.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The scrape job of each component: exporters/catalog/selectors.py's names, which the rules, the
dashboards and the analytics select on. The ServiceMonitors take the job from the Service's
app.kubernetes.io/name label (jobLabel), so it stays the same whatever the release is called.
*/}}
{{- define "lockstep.job" -}}
{{- get (dict "node" "lockstep-node" "power" "lockstep-power" "analytics" "lockstep-analytics" "fabric" "lockstep-fabric" "switch" "lockstep-switch" "storage" "lockstep-storage") .component -}}
{{- end -}}

{{/* Selector labels of a component: its job name and the release. Immutable once installed. */}}
{{- define "lockstep.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lockstep.job" . }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{- define "lockstep.labels" -}}
{{ include "lockstep.selectorLabels" . }}
app.kubernetes.io/part-of: lockstep
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Labels of objects that belong to no one component (rules, dashboards). */}}
{{- define "lockstep.commonLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: lockstep
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "lockstep.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The node agent talks to the API server and the kubelet unless the job mapping is Slurm's alone. */}}
{{- define "lockstep.nodeAgent.kubernetesJobs" -}}
{{- if ne .Values.nodeAgent.jobs.source "slurm" }}true{{ end -}}
{{- end -}}

{{- define "lockstep.nodeAgent.serviceAccountName" -}}
{{- if .Values.nodeAgent.serviceAccount.create -}}
{{- default (include "lockstep.componentName" (dict "root" . "component" "node")) .Values.nodeAgent.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.nodeAgent.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The container hardening every lockstep container shares: it only reads, with no capability. */}}
{{- define "lockstep.containerSecurityContext" -}}
privileged: false
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end -}}

{{- define "lockstep.nonRootPodSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65534
runAsGroup: 65534
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{/* metadata.namespace, so that `helm template | kubectl apply -f -` lands where `helm install` would. */}}
{{- define "lockstep.namespace" -}}
namespace: {{ .Release.Namespace }}
{{- end -}}
