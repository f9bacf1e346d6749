{{- define "kplan-webhook.name" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kplan-webhook.selectorLabels" -}}
app.kubernetes.io/name: kplan-webhook
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kplan-webhook.labels" -}}
{{ include "kplan-webhook.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "kplan-webhook.image" -}}
{{- $tag := .Values.image.tag | default (printf "v%s" .Chart.AppVersion) -}}
{{- if eq $tag "v0.0.0" -}}
{{- fail "image.tag: this chart comes from a clone (appVersion 0.0.0), and no image v0.0.0 exists: set image.tag to a released version (e.g. --set image.tag=v1.2.3), or image.repository and image.tag to an image you built from the clone (docs/webhook.md, \"Install from a clone\")" -}}
{{- end -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}

{{- define "kplan-webhook.secretName" -}}
{{ .Values.github.existingSecret | default (include "kplan-webhook.name" .) }}
{{- end -}}
