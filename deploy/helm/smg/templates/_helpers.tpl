{{/* Names and labels, as `helm create` makes them. */}}
{{- define "smg.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "smg.fullname" -}}
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

{{- define "smg.selectorLabels" -}}
app.kubernetes.io/name: {{ include "smg.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "smg.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "smg.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "smg.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "smg.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The namespace discovery watches; empty when it watches all of them. */}}
{{- define "smg.discoveryNamespace" -}}
{{- if not .Values.discovery.allNamespaces }}
{{- default .Release.Namespace .Values.discovery.namespace }}
{{- end }}
{{- end }}

{{/* The Secret holding the worker API key, or nothing. */}}
{{- define "smg.apiKeySecret" -}}
{{- if .Values.apiKey.existingSecret }}
{{- .Values.apiKey.existingSecret }}
{{- else if .Values.apiKey.value }}
{{- printf "%s-api-key" (include "smg.fullname" .) }}
{{- end }}
{{- end }}

{{/* The Secret holding the CA bundle of https workers, or nothing. */}}
{{- define "smg.workerCASecret" -}}
{{- if .Values.workerCA.existingSecret }}
{{- .Values.workerCA.existingSecret }}
{{- else if .Values.workerCA.pem }}
{{- printf "%s-worker-ca" (include "smg.fullname" .) }}
{{- end }}
{{- end }}

{{/*
smg.scalar prints a value as the command line wants it: values files give every number as a
float64, which would print 536870912 as 5.36870912e+08.
*/}}
{{- define "smg.scalar" -}}
{{- if and (kindIs "float64" .) (eq (floor .) (float64 .)) }}
{{- int64 . }}
{{- else }}
{{- . }}
{{- end }}
{{- end }}

{{/*
smg.flag renders [name value] as args items, one per line: nothing for null, false or "";
--name for true; --name=value for a scalar; --name=item per item of a list; --name=key=value
per entry of a map (sorted by key), the form of the selector flags.
*/}}
{{- define "smg.flag" -}}
{{- $name := index . 0 }}
{{- $v := index . 1 }}
{{- if kindIs "invalid" $v }}
{{- else if kindIs "bool" $v }}
{{- if $v }}
- {{ printf "--%s" $name | quote }}
{{- end }}
{{- else if kindIs "slice" $v }}
{{- range $v }}
- {{ printf "--%s=%s" $name (include "smg.scalar" .) | quote }}
{{- end }}
{{- else if kindIs "map" $v }}
{{- range $k, $x := $v }}
- {{ printf "--%s=%s=%s" $name $k (include "smg.scalar" $x) | quote }}
{{- end }}
{{- else if ne (toString $v) "" }}
- {{ printf "--%s=%s" $name (include "smg.scalar" $v) | quote }}
{{- end }}
{{- end }}

{{/* smg.args is the container's command line: `smg launch` and one flag per set value. */}}
{{- define "smg.args" -}}
{{- $g := .Values.gateway }}
{{- $d := .Values.discovery }}
{{- $r := .Values.retries }}
{{- $cb := .Values.circuitBreaker }}
{{- $h := .Values.healthCheck }}
{{- $pd := .Values.pd }}
{{- $m := .Values.mesh }}
{{- $flags := list
  (list "host" $g.host)
  (list "port" $g.port)
  (list "prometheus-host" $g.metricsHost)
  (list "prometheus-port" $g.metricsPort)
  (list "policy" $g.policy)
  (list "worker-urls" $g.workerUrls)
  (list "log-level" $g.logLevel)
  (list "log-json" $g.logJson)
  (list "data-plane" $g.dataPlane)
  (list "max-payload-size" $g.maxPayloadSize)
  (list "max-request-body-memory" $g.maxRequestBodyMemory)
  (list "max-header-size" $g.maxHeaderSize)
  (list "max-concurrent-requests" $g.maxConcurrentRequests)
  (list "queue-size" $g.queueSize)
  (list "queue-timeout-secs" $g.queueTimeoutSecs)
  (list "rate-limit-tokens-per-second" $g.rateLimitTokensPerSecond)
  (list "request-timeout-secs" $g.requestTimeoutSecs)
  (list "first-byte-timeout-secs" $g.firstByteTimeoutSecs)
  (list "worker-stall-secs" $g.workerStallSecs)
  (list "shutdown-grace-period-secs" $g.shutdownGracePeriodSecs)
  (list "drain-settle-secs" $g.drainSettleSecs)
  (list "max-workers" $g.maxWorkers)
  (list "max-connections-per-worker" $g.maxConnectionsPerWorker)
  (list "routing-key-headers" $g.routingKeyHeaders)
  (list "engine-metrics" $g.engineMetrics)
  (list "disable-pprof" $g.disablePprof)
  (list "pprof-allow-remote" $g.pprofAllowRemote)
  (list "disable-retries" $r.disabled)
  (list "retry-max-retries" $r.maxRetries)
  (list "retry-initial-backoff-ms" $r.initialBackoffMs)
  (list "retry-max-backoff-ms" $r.maxBackoffMs)
  (list "retry-backoff-multiplier" $r.backoffMultiplier)
  (list "retry-jitter-factor" $r.jitterFactor)
  (list "disable-circuit-breaker" $cb.disabled)
  (list "cb-failure-threshold" $cb.failureThreshold)
  (list "cb-success-threshold" $cb.successThreshold)
  (list "cb-timeout-duration-secs" $cb.timeoutDurationSecs)
  (list "cb-window-duration-secs" $cb.windowDurationSecs)
  (list "disable-health-check" $h.disabled)
  (list "health-check-endpoint" $h.endpoint)
  (list "health-check-interval-secs" $h.intervalSecs)
  (list "health-check-timeout-secs" $h.timeoutSecs)
  (list "health-success-threshold" $h.successThreshold)
  (list "health-failure-threshold" $h.failureThreshold)
  (list "remove-unhealthy-workers" (eq (toString $h.removeUnhealthyWorkers) "true"))
  (list "no-remove-unhealthy-workers" (eq (toString $h.removeUnhealthyWorkers) "false"))
  (list "cache-threshold" .Values.cacheAware.cacheThreshold)
  (list "balance-abs-threshold" .Values.cacheAware.balanceAbsThreshold)
  (list "balance-rel-threshold" .Values.cacheAware.balanceRelThreshold)
  (list "eviction-interval" .Values.cacheAware.evictionIntervalSecs)
  (list "max-tree-size" .Values.cacheAware.maxTreeSize)
  (list "block-size" .Values.cacheAware.blockSize)
  (list "worker-overload-protection" .Values.overloadProtection.enabled)
  (list "worker-overload-waiting-requests" .Values.overloadProtection.waitingRequests)
  (list "worker-overload-token-usage" .Values.overloadProtection.tokenUsage)
  (list "disable-load-monitoring" .Values.loadMonitor.disabled)
  (list "load-monitor-interval" .Values.loadMonitor.intervalSecs)
-}}
{{- if $d.enabled }}
{{- $flags = concat $flags (list
  (list "service-discovery" true)
  (list "selector" $d.selector)
  (list "service-discovery-namespace" (include "smg.discoveryNamespace" .))
  (list "service-discovery-port" $d.port)
  (list "model-id-from" $d.modelIdFrom)
  (list "model-alias" $d.modelAliases)
  (list "worker-startup-delay" $d.workerStartupDelay)
  (list "worker-startup-check-interval" $d.workerStartupCheckInterval)
  (list "worker-startup-timeout-secs" $d.workerStartupTimeoutSecs)
  (list "job-queue-capacity" $d.jobQueueCapacity)
  (list "job-queue-concurrency" $d.jobQueueConcurrency)
) }}
{{- end }}
{{- if $pd.enabled }}
{{- $flags = concat $flags (list
  (list "pd-disaggregation" true)
  (list "prefill-policy" $pd.prefillPolicy)
  (list "decode-policy" $pd.decodePolicy)
  (list "kv-connector" $pd.kvConnector)
  (list "decode" $pd.decode)
) }}
{{- if $d.enabled }}
{{- $flags = concat $flags (list (list "prefill-selector" $pd.prefillSelector) (list "decode-selector" $pd.decodeSelector)) }}
{{- end }}
{{- if $pd.epd.enabled }}
{{- $flags = concat $flags (list
  (list "epd-disaggregation" true)
  (list "encode-policy" $pd.epd.encodePolicy)
) }}
{{- if $d.enabled }}
{{- $flags = append $flags (list "encode-selector" $pd.epd.encodeSelector) }}
{{- end }}
{{- end }}
{{- end }}
{{- if $m.enabled }}
{{- $flags = concat $flags (list
  (list "enable-mesh" true)
  (list "mesh-server-name" "$(POD_NAME)")
  (list "mesh-host" $m.host)
  (list "mesh-advertise-host" "$(POD_IP)")
  (list "mesh-port" $m.port)
  (list "router-selector" (include "smg.selectorLabels" . | fromYaml))
  (list "mesh-peer-urls" $m.peerUrls)
  (list "mesh-allow-insecure" $m.allowInsecure)
) }}
{{- if $m.tls.secretName }}
{{- $flags = concat $flags (list
  (list "mesh-tls-cert" "/etc/smg/mesh-tls/tls.crt")
  (list "mesh-tls-key" "/etc/smg/mesh-tls/tls.key")
  (list "mesh-tls-ca" "/etc/smg/mesh-tls/ca.crt")
) }}
{{- end }}
{{- end }}
{{- if include "smg.apiKeySecret" . }}
{{- $flags = append $flags (list "api-key-file" "/etc/smg/api-key/api-key") }}
{{- end }}
{{- if include "smg.workerCASecret" . }}
{{- $flags = append $flags (list "worker-ca-file" "/etc/smg/worker-ca/ca.crt") }}
{{- end }}
- launch
{{- range $flags }}
{{- include "smg.flag" . }}
{{- end }}
{{- if $pd.enabled }}
{{- range $pd.prefill }}
- --prefill
- {{ required "pd.prefill entries need a url" .url | quote }}
{{- if not (kindIs "invalid" .bootstrapPort) }}
- {{ include "smg.scalar" .bootstrapPort | quote }}
{{- end }}
{{- end }}
{{- if $pd.epd.enabled }}
{{- range $pd.epd.encode }}
- --encode
- {{ required "pd.epd.encode entries need a url" .url | quote }}
{{- if not (kindIs "invalid" .bootstrapPort) }}
- {{ include "smg.scalar" .bootstrapPort | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* smg.validate fails the render on combinations the gateway would refuse or that cannot work. */}}
{{- define "smg.validate" -}}
{{- if and .Values.mesh.enabled (not .Values.discovery.enabled) }}
{{- fail "mesh.enabled needs discovery.enabled: the gateways find their peers by pod label (--router-selector), which is part of service discovery" }}
{{- end }}
{{- if and .Values.mesh.enabled (ne (include "smg.discoveryNamespace" .) "") (ne (include "smg.discoveryNamespace" .) .Release.Namespace) }}
{{- fail "mesh.enabled: router discovery watches discovery.namespace, so it must be the release namespace (or set discovery.allNamespaces)" }}
{{- end }}
{{- if and .Values.apiKey.existingSecret .Values.apiKey.value }}
{{- fail "apiKey: set existingSecret or value, not both" }}
{{- end }}
{{- if and .Values.workerCA.existingSecret .Values.workerCA.pem }}
{{- fail "workerCA: set existingSecret or pem, not both" }}
{{- end }}
{{- if and .Values.pd.epd.enabled (not .Values.pd.enabled) }}
{{- fail "pd.epd.enabled needs pd.enabled: EPD is PD mode with an encode leg, and the pd settings configure its prefill and decode legs" }}
{{- end }}
{{- if and .Values.pd.epd.enabled .Values.discovery.enabled (or (empty .Values.pd.epd.encodeSelector) (empty .Values.pd.prefillSelector) (empty .Values.pd.decodeSelector)) }}
{{- fail "pd.epd.enabled with discovery needs all three role selectors: pd.epd.encodeSelector, pd.prefillSelector and pd.decodeSelector" }}
{{- end }}
{{- end }}
