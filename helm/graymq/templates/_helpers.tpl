{{/*
Names, labels and the few values several templates must agree on
(the name server URL, the database Secret, the admin and broker token Secrets).
*/}}

{{- define "graymq.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Prefix of every resource name: "<release>-graymq" unless the release name already holds it. */}}
{{- define "graymq.fullname" -}}
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

{{- define "graymq.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Component resource names; StatefulSet names stay short enough for their pods' revision label. */}}
{{- define "graymq.nameserver.fullname" -}}
{{- printf "%s-nameserver" (include "graymq.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "graymq.broker.fullname" -}}
{{- printf "%s-broker" (include "graymq.fullname" .) | trunc 52 | trimSuffix "-" }}
{{- end }}

{{- define "graymq.broker.headlessName" -}}
{{- printf "%s-broker-headless" (include "graymq.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "graymq.migrations.fullname" -}}
{{- printf "%s-migrate" (include "graymq.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "graymq.postgresql.fullname" -}}
{{- printf "%s-postgresql" (include "graymq.fullname" .) | trunc 52 | trimSuffix "-" }}
{{- end }}

{{/* Labels: call with (dict "ctx" $ "component" "nameserver"). */}}
{{- define "graymq.selectorLabels" -}}
app.kubernetes.io/name: {{ include "graymq.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "graymq.labels" -}}
helm.sh/chart: {{ include "graymq.chart" .ctx }}
{{ include "graymq.selectorLabels" . }}
app.kubernetes.io/part-of: graymq
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
{{- end }}

{{- define "graymq.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* "https" with tls.enabled, else "http": the name server's scheme and the name of its port. */}}
{{- define "graymq.nameserver.scheme" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end }}
{{- end }}

{{/* In-cluster DNS name of the name server Service (what its TLS certificate must name). */}}
{{- define "graymq.nameserver.host" -}}
{{- printf "%s.%s.svc.%s" (include "graymq.nameserver.fullname" .) .Release.Namespace .Values.clusterDomain }}
{{- end }}

{{/* In-cluster URL of the name server Service: what brokers register with. */}}
{{- define "graymq.nameserver.url" -}}
{{- printf "%s://%s:%d" (include "graymq.nameserver.scheme" .) (include "graymq.nameserver.host" .) (int .Values.nameserver.service.port) }}
{{- end }}

{{/* Secret and key holding GRAYMQ_DB_URL: the chart's own for the bundled PostgreSQL, else the user's. */}}
{{- define "graymq.database.secretName" -}}
{{- if .Values.postgresql.enabled }}
{{- include "graymq.postgresql.fullname" . }}
{{- else }}
{{- required "externalDatabase.existingSecret is required when postgresql.enabled=false: a Secret whose key holds the name server's database URL (postgresql+psycopg://USER:PASSWORD@HOST:5432/DB)" .Values.externalDatabase.existingSecret }}
{{- end }}
{{- end }}

{{- define "graymq.database.secretKey" -}}
{{- if .Values.postgresql.enabled }}db-url{{ else }}{{ .Values.externalDatabase.existingSecretKey }}{{ end }}
{{- end }}

{{- define "graymq.postgresql.host" -}}
{{- printf "%s.%s.svc.%s" (include "graymq.postgresql.fullname" .) .Release.Namespace .Values.clusterDomain }}
{{- end }}

{{- define "graymq.adminTokens.secretName" -}}
{{- if .Values.adminTokens.existingSecret }}
{{- .Values.adminTokens.existingSecret }}
{{- else }}
{{- printf "%s-admin-tokens" (include "graymq.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "graymq.adminTokens.secretKey" -}}
{{- if .Values.adminTokens.existingSecret }}{{ .Values.adminTokens.existingSecretKey }}{{ else }}admin-tokens{{ end }}
{{- end }}

{{/* Secret and key holding the brokers' token alone (GRAYMQ_BROKER_TOKEN): the chart's own or the user's. */}}
{{- define "graymq.brokerToken.secretName" -}}
{{- if .Values.brokerToken.existingSecret }}
{{- .Values.brokerToken.existingSecret }}
{{- else }}
{{- printf "%s-broker-token" (include "graymq.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "graymq.brokerToken.secretKey" -}}
{{- if .Values.brokerToken.existingSecret }}{{ .Values.brokerToken.existingSecretKey }}{{ else }}broker-token{{ end }}
{{- end }}

{{/* The writable /tmp every graymq container gets (the root filesystem is read-only). */}}
{{- define "graymq.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end }}

{{/* Where the TLS Secret (tls.crt, tls.key, optional ca.crt) is mounted in name server and broker pods. */}}
{{- define "graymq.tls.dir" -}}
/etc/graymq/tls
{{- end }}

{{/* The TLS Secret as a volume (include with tls.enabled); its files readable by the pod's group only. */}}
{{- define "graymq.tls.volume" -}}
- name: tls
  secret:
    secretName: {{ required "tls.existingSecret is required when tls.enabled=true: a Secret of type kubernetes.io/tls (tls.crt, tls.key, optional ca.crt)" .Values.tls.existingSecret }}
    defaultMode: 0440
{{- end }}

{{- define "graymq.tls.volumeMount" -}}
- name: tls
  mountPath: {{ include "graymq.tls.dir" . }}
  readOnly: true
{{- end }}

{{/* The CA file of the mounted Secret (with tls.caCert): GRAYMQ_TLS_CA, what servers are verified with. */}}
{{- define "graymq.tls.caFile" -}}
{{- printf "%s/ca.crt" (include "graymq.tls.dir" .) }}
{{- end }}
