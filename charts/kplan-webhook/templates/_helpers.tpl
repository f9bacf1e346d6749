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
{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}
{{- end -}}

{{- define "kplan-webhook.secretName" -}}
{{ .Values.github.existingSecret | default (include "kplan-webhook.name" .) }}
{{- end -}}
