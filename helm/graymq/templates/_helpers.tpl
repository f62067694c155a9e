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

{{/*
Broker sets (broker.replication set): broker.sets StatefulSets of broker.replicasPerSet pods. Set INDEX
is named "<broker fullname>-INDEX": its StatefulSet, its PodDisruptionBudget and the GRAYMQ_BROKER_NAME of
its every pod. Kept to 52 characters like the other StatefulSet names. Call with (dict "ctx" $ "index" N).
*/}}
{{- define "graymq.broker.setName" -}}
{{- printf "%s-%d" (include "graymq.broker.fullname" .ctx | trunc 48 | trimSuffix "-") (int .index) }}
{{- end }}

{{/*
The broker StatefulSets, as JSON {"statefulSets": [{"name", "set", "replicas"}]} ("set": the broker set
its pods are replicas of, "" for single-copy brokers): what the StatefulSet and PodDisruptionBudget
templates range over.
*/}}
{{- define "graymq.broker.statefulSets" -}}
{{- $statefulSets := list }}
{{- if .Values.broker.replication }}
{{- range $index := until (int .Values.broker.sets) }}
{{- $name := include "graymq.broker.setName" (dict "ctx" $ "index" $index) }}
{{- $statefulSets = append $statefulSets (dict "name" $name "set" $name "replicas" $.Values.broker.replicasPerSet) }}
{{- end }}
{{- else }}
{{- $statefulSets = list (dict "name" (include "graymq.broker.fullname" .) "set" "" "replicas" .Values.broker.replicaCount) }}
{{- end }}
{{- dict "statefulSets" $statefulSets | toJson }}
{{- end }}

{{/* The label that tells the pods of one broker set from the others'. */}}
{{- define "graymq.broker.setLabel" -}}
graymq.io/broker-set
{{- end }}

{{/*
Selector labels of broker pods: every broker's (what the headless Service selects), plus the set's own
label when .set names a broker set. Call with (dict "ctx" $ "set" NAME-or-"").
*/}}
{{- define "graymq.broker.selectorLabels" -}}
{{ include "graymq.selectorLabels" (dict "ctx" .ctx "component" "broker") }}
{{- with .set }}
{{ include "graymq.broker.setLabel" $.ctx }}: {{ . }}
{{- end }}
{{- end }}

{{/*
The broker container, the same in every broker pod: one StatefulSet of single-copy brokers, each named
after its pod (.set ""), or the replicas of broker set .set, each named after the set and numbered by
its pod's ordinal. Call with (dict "ctx" $ "set" NAME-or-"").
*/}}
{{- define "graymq.broker.container" -}}
{{- $set := .set }}
{{- with .ctx }}
{{- $headless := include "graymq.broker.headlessName" . -}}
- name: broker
  image: {{ include "graymq.image" . | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  # Every setting comes from the GRAYMQ_BROKER_* variables below.
  args: ["broker"]
  env:
    # Downward API; expanded into the broker's name and advertised address below.
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    {{- if $set }}
    # Every replica of the set has its name; its replica id is its pod's ordinal (Kubernetes >= 1.28).
    - name: GRAYMQ_BROKER_NAME
      value: {{ $set | quote }}
    - name: GRAYMQ_BROKER_REPLICA_ID
      valueFrom:
        fieldRef:
          fieldPath: metadata.labels['apps.kubernetes.io/pod-index']
    - name: GRAYMQ_BROKER_REPLICATION
      value: {{ .Values.broker.replication | quote }}
    - name: GRAYMQ_BROKER_REPLICATION_TIMEOUT_S
      value: {{ .Values.broker.replicationTimeoutSeconds | quote }}
    - name: GRAYMQ_BROKER_REPLICA_LAG_S
      value: {{ .Values.broker.replicaLagSeconds | quote }}
    - name: GRAYMQ_BROKER_REPLICA_LAG_BYTES
      value: {{ .Values.broker.replicaLagBytes | int64 | quote }}
    {{- else }}
    - name: GRAYMQ_BROKER_NAME
      value: "$(POD_NAME)"
    {{- end }}
    - name: GRAYMQ_BROKER_HOST
      value: "0.0.0.0"
    - name: GRAYMQ_BROKER_PORT
      value: {{ .Values.broker.port | quote }}
    - name: GRAYMQ_BROKER_ADVERTISED_ADDRESS
      value: "$(POD_NAME).{{ $headless }}.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}:{{ .Values.broker.port }}"
    - name: GRAYMQ_BROKER_NAMESERVER
      value: {{ include "graymq.nameserver.url" . | quote }}
    # Registers with the name servers and reads the principals this broker enforces.
    - name: GRAYMQ_BROKER_TOKEN
      valueFrom:
        secretKeyRef:
          name: {{ include "graymq.brokerToken.secretName" . }}
          key: {{ include "graymq.brokerToken.secretKey" . }}
    # nameserver.devMode: authentication off on the broker port too.
    - name: GRAYMQ_DEV_MODE
      value: {{ .Values.nameserver.devMode | quote }}
    - name: GRAYMQ_BROKER_STORE_DIR
      value: /var/lib/graymq/store
    - name: GRAYMQ_BROKER_FLUSH
      value: {{ .Values.broker.flush | quote }}
    - name: GRAYMQ_BROKER_FLUSH_INTERVAL_MS
      value: {{ .Values.broker.flushIntervalMs | quote }}
    {{- if .Values.broker.segmentSize }}
    - name: GRAYMQ_BROKER_SEGMENT_SIZE
      value: {{ .Values.broker.segmentSize | int64 | quote }}
    {{- end }}
    - name: GRAYMQ_BROKER_RETENTION_HOURS
      value: {{ .Values.broker.retentionHours | quote }}
    - name: GRAYMQ_BROKER_AUTO_CREATE_TOPIC
      value: {{ .Values.broker.autoCreateTopic | quote }}
    - name: GRAYMQ_BROKER_DEFAULT_QUEUE_NUMS
      value: {{ .Values.broker.defaultQueueNums | quote }}
    - name: GRAYMQ_BROKER_DEFAULT_GRAY_QUEUE_NUMS
      value: {{ .Values.broker.defaultGrayQueueNums | quote }}
    - name: GRAYMQ_BROKER_METRICS_PORT
      value: {{ .Values.broker.metricsPort | quote }}
    {{- if .Values.broker.grpcPort }}
    # The RocketMQ 5 gRPC endpoint for stock clients, registered with the name servers next to the broker port.
    - name: GRAYMQ_BROKER_GRPC_PORT
      value: {{ .Values.broker.grpcPort | quote }}
    {{- end }}
    - name: GRAYMQ_LOG_LEVEL
      value: {{ .Values.logLevel | quote }}
    {{- if .Values.tls.enabled }}
    # The broker port speaks TLS only, with the certificate of tls.existingSecret.
    - name: GRAYMQ_BROKER_TLS_CERT
      value: {{ printf "%s/tls.crt" (include "graymq.tls.dir" .) | quote }}
    - name: GRAYMQ_BROKER_TLS_KEY
      value: {{ printf "%s/tls.key" (include "graymq.tls.dir" .) | quote }}
    {{- if .Values.tls.caCert }}
    # Verifies the name server's certificate (without it: the image's system trust store).
    - name: GRAYMQ_TLS_CA
      value: {{ include "graymq.tls.caFile" . | quote }}
    {{- end }}
    {{- end }}
  ports:
    - name: broker
      containerPort: {{ .Values.broker.port }}
      protocol: TCP
    - name: metrics
      containerPort: {{ .Values.broker.metricsPort }}
      protocol: TCP
    {{- if .Values.broker.grpcPort }}
    - name: grpc
      containerPort: {{ .Values.broker.grpcPort }}
      protocol: TCP
    {{- end }}
  # The broker protocol is binary TCP: an open port is the honest health signal.
  startupProbe:
    tcpSocket:
      port: broker
    periodSeconds: 2
    # Recovery replays the commit log from the last checkpoint before the port opens.
    failureThreshold: 150
  livenessProbe:
    tcpSocket:
      port: broker
    periodSeconds: 10
    timeoutSeconds: 3
    failureThreshold: 3
  readinessProbe:
    tcpSocket:
      port: broker
    periodSeconds: 5
    timeoutSeconds: 3
    failureThreshold: 2
  resources:
    {{- toYaml .Values.broker.resources | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  volumeMounts:
    - name: store
      mountPath: /var/lib/graymq/store
    - name: tmp
      mountPath: /tmp
    {{- if .Values.tls.enabled }}
    {{- include "graymq.tls.volumeMount" . | nindent 4 }}
    {{- end }}
{{- end }}
{{- end }}

{{/*
The brokers' affinity: broker.affinity, plus, for broker set .set, a preference for a node without
another replica of that set (one node lost takes at most one copy). Call with (dict "ctx" $ "set" NAME-or-"").
*/}}
{{- define "graymq.broker.affinity" -}}
{{- $affinity := deepCopy .ctx.Values.broker.affinity }}
{{- if .set }}
{{- $anti := get $affinity "podAntiAffinity" | default (dict) }}
{{- $preferred := get $anti "preferredDuringSchedulingIgnoredDuringExecution" | default (list) }}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (include "graymq.broker.selectorLabels" . | fromYaml)) }}
{{- $preferred = append $preferred (dict "weight" 100 "podAffinityTerm" $term) }}
{{- $_ := set $anti "preferredDuringSchedulingIgnoredDuringExecution" $preferred }}
{{- $_ = set $affinity "podAntiAffinity" $anti }}
{{- end }}
{{- with $affinity }}
{{- toYaml . }}
{{- end }}
{{- end }}
