{{- define "svc.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "svc.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component (core, gateway, migrate). */}}
{{- define "svc.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "svc.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "svc.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "svc.fullname" .)) -}}
{{- end -}}

{{- define "svc.coreService" -}}
{{- printf "%s-core" (include "svc.fullname" .) -}}
{{- end -}}

{{/* The headless Service whose DNS name resolves to every ready core pod (the gateways' target). */}}
{{- define "svc.corePods" -}}
{{- printf "%s-core-pods" (include "svc.fullname" .) -}}
{{- end -}}

{{/* The environment every svc container shares: plain values, then the Secret's keys. */}}
{{- define "svc.env" -}}
- name: SVC_CONFIG
  value: /etc/svc/svc.yaml
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- with .Values.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ $.Values.otel.protocol | quote }}
{{- end }}
{{- end -}}

{{- define "svc.envFrom" -}}
- secretRef:
    name: {{ include "svc.secretName" . }}
{{- end -}}

{{- define "svc.volumes" -}}
- name: config
  configMap:
    name: {{ include "svc.fullname" . }}-config
- name: tmp
  emptyDir: {}
{{- end -}}

{{- define "svc.volumeMounts" -}}
- name: config
  mountPath: /etc/svc
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "svc.lifecycle" -}}
preStop:
  exec:
    command: ["sleep", "{{ .Values.drain.preStopSeconds }}"]
{{- end -}}
