{{/* Chart name, at most 63 characters (a DNS label). */}}
{{- define "gatehouse.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-scoped name of every object. */}}
{{- define "gatehouse.fullname" -}}
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

{{- define "gatehouse.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gatehouse.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gatehouse.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gatehouse.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "gatehouse.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gatehouse.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gatehouse.secretName" -}}
{{- .Values.existingSecret | default (include "gatehouse.fullname" .) -}}
{{- end -}}

{{/* The session store URL: config.session.store, else SQLite on the /data volume. */}}
{{- define "gatehouse.store" -}}
{{- dig "session" "store" "" .Values.config | default "sqlite:///data/gatehouse.sqlite" -}}
{{- end -}}

{{/* "true" when the store is shared by several replicas: redis://, rediss://, and their +sentinel and +cluster forms. */}}
{{- define "gatehouse.sharedStore" -}}
{{- $store := include "gatehouse.store" . -}}
{{- if regexMatch "^rediss?(\\+(sentinel|cluster))?://" $store -}}true{{- end -}}
{{- end -}}

{{/* "true" when /data is a PersistentVolumeClaim: a SQLite store, one replica, persistence on. */}}
{{- define "gatehouse.persistent" -}}
{{- if and .Values.persistence.enabled (hasPrefix "sqlite:" (include "gatehouse.store" .)) (not .Values.autoscaling.enabled) (eq (int .Values.replicaCount) 1) -}}true{{- end -}}
{{- end -}}

{{- define "gatehouse.clientAuthMethod" -}}
{{- dig "provider" "clientAuthMethod" "client_secret_post" .Values.config -}}
{{- end -}}

{{/* The Secret keys of the session encryption keys, first one encrypts. */}}
{{- define "gatehouse.sessionKeyNames" -}}
{{- if .Values.existingSecret -}}
{{- toJson .Values.existingSecretKeys.sessionKeys -}}
{{- else -}}
{{- $names := list -}}
{{- range $index, $_ := .Values.secret.sessionKeys -}}
{{- $names = append $names (ternary "session-key" (printf "session-key-%d" $index) (eq $index 0)) -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}
{{- end -}}

{{/* GATEHOUSE_SESSION_KEY, then GATEHOUSE_SESSION_KEY_1, _2, ... */}}
{{/* The admin token's key in the Secret, or "" when the session API is off (README "Ending sessions"). */}}
{{- define "gatehouse.adminTokenKey" -}}
{{- if .Values.existingSecret -}}{{- .Values.existingSecretKeys.adminToken | default "" -}}
{{- else if .Values.secret.adminToken -}}admin-token
{{- end -}}
{{- end -}}

{{/* The Secret's keys of the assertion signing keys (README "Identity assertion"), as JSON; the first signs. */}}
{{- define "gatehouse.assertionKeyNames" -}}
{{- if .Values.existingSecret -}}
{{- toJson (.Values.existingSecretKeys.assertionKeys | default list) -}}
{{- else -}}
{{- $names := list -}}
{{- range $index, $_ := .Values.secret.assertionKeys -}}
{{- $names = append $names (ternary "assertion-key" (printf "assertion-key-%d" $index) (eq $index 0)) -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}
{{- end -}}

{{/* GATEHOUSE_ASSERTION_KEY, then GATEHOUSE_ASSERTION_KEY_1, _2, ... */}}
{{- define "gatehouse.assertionKeyEnv" -}}
{{- if eq (int .) 0 -}}GATEHOUSE_ASSERTION_KEY{{- else -}}{{- printf "GATEHOUSE_ASSERTION_KEY_%d" (int .) -}}{{- end -}}
{{- end -}}

{{/* The environment variable holding a named provider's secret (README "Several identity providers"): GATEHOUSE_PROVIDER_<NAME>_<KIND>. */}}
{{- define "gatehouse.providerSecretEnv" -}}
{{- printf "GATEHOUSE_PROVIDER_%s_%s" (index . 0 | upper | replace "-" "_" | replace "." "_") (index . 1) -}}
{{- end -}}

{{- define "gatehouse.sessionKeyEnv" -}}
{{- if eq (int .) 0 -}}GATEHOUSE_SESSION_KEY{{- else -}}{{- printf "GATEHOUSE_SESSION_KEY_%d" (int .) -}}{{- end -}}
{{- end -}}

{{/*
Every check that must stop a rendering, with a message naming the value to
change. Included by the Deployment and the ConfigMap.
*/}}
{{- define "gatehouse.validate" -}}
{{- $store := include "gatehouse.store" . -}}
{{- $shared := include "gatehouse.sharedStore" . -}}
{{- if and (gt (int .Values.replicaCount) 1) (not $shared) -}}
{{- fail (printf "replicaCount is %d but config.session.store is %s: several replicas must share one session store, so set config.session.store to a redis://HOST:PORT/DB or rediss://HOST:PORT/DB URL, or a redis+sentinel:// or redis+cluster:// one (sqlite:// and memory:// serve a single replica)" (int .Values.replicaCount) $store) -}}
{{- end -}}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.maxReplicas) 1) (not $shared) -}}
{{- fail (printf "autoscaling.maxReplicas is %d but config.session.store is %s: several replicas must share one session store, so set config.session.store to a redis://HOST:PORT/DB or rediss://HOST:PORT/DB URL, or a redis+sentinel:// or redis+cluster:// one (sqlite:// and memory:// serve a single replica)" (int .Values.autoscaling.maxReplicas) $store) -}}
{{- end -}}
{{- if hasPrefix "sqlite:" $store -}}
{{- $path := trimPrefix "sqlite://" $store -}}
{{- if and (hasPrefix "/" $path) (not (hasPrefix "/data/" $path)) -}}
{{- fail (printf "config.session.store is %s: a SQLite file must be under /data, the pod's only writable volume (e.g. sqlite:///data/gatehouse.sqlite)" $store) -}}
{{- end -}}
{{- end -}}
{{- if .Values.podDisruptionBudget.enabled -}}
{{- $replicas := ternary (int .Values.autoscaling.minReplicas) (int .Values.replicaCount) .Values.autoscaling.enabled -}}
{{- $pdb := .Values.podDisruptionBudget -}}
{{- $blocks := false -}}
{{- if not (kindIs "invalid" $pdb.maxUnavailable) -}}
{{- $blocks = or (eq (toString $pdb.maxUnavailable) "0") (eq (toString $pdb.maxUnavailable) "0%") -}}
{{- else if eq (toString $pdb.minAvailable) "100%" -}}
{{- $blocks = true -}}
{{- else if not (hasSuffix "%" (toString $pdb.minAvailable)) -}}
{{- $blocks = ge (int $pdb.minAvailable) $replicas -}}
{{- end -}}
{{- if $blocks -}}
{{- fail (printf "podDisruptionBudget would block every node drain: with %d replica(s) it allows no pod to be evicted (minAvailable %v, maxUnavailable %v). Run more replicas (a redis:// store and replicaCount or autoscaling.minReplicas of 2 or more), or leave podDisruptionBudget.enabled false" $replicas $pdb.minAvailable $pdb.maxUnavailable) -}}
{{- end -}}
{{- end -}}
{{- if not (dig "server" "publicUrl" "" .Values.config) -}}
{{- fail "config.server.publicUrl is required: the URL browsers use to reach the gateway, e.g. https://app.example.com" -}}
{{- end -}}
{{- if .Values.forwardAuth.enabled -}}
{{- if not (dig "forwardAuth" "trustedProxies" list .Values.config) -}}
{{- fail "config.forwardAuth.trustedProxies is required with forwardAuth.enabled: the Ingress controller pods' addresses/CIDRs, the only sources /forward-auth answers" -}}
{{- end -}}
{{- if and .Values.networkPolicy.enabled (not .Values.networkPolicy.httpFrom) -}}
{{- fail "networkPolicy.httpFrom is required with forwardAuth.enabled: the Ingress controller's pods (e.g. a namespaceSelector for its namespace), so that nothing else reaches /forward-auth" -}}
{{- end -}}
{{- else if not (or (dig "upstream" "" .Values.config) (dig "routes" list .Values.config)) -}}
{{- fail "config.upstream is required: where every non-gateway path goes, e.g. http://my-app.my-namespace.svc:8080 (or give config.routes, or set forwardAuth.enabled)" -}}
{{- end -}}
{{- if not (dig "provider" "clientId" "" .Values.config) -}}
{{- fail "config.provider.clientId is required: the client id registered for the gateway at the authorization server" -}}
{{- end -}}
{{- if not (or (dig "provider" "issuer" "" .Values.config) (and (dig "provider" "authorizationEndpoint" "" .Values.config) (dig "provider" "tokenEndpoint" "" .Values.config))) -}}
{{- fail "config.provider.issuer is required (or config.provider.authorizationEndpoint and config.provider.tokenEndpoint for a server without discovery)" -}}
{{- end -}}
{{- range $key, $why := dict "server.host" "0.0.0.0, where the probes and Services reach it" "server.port" "8080, the container port named http" "admin" "0.0.0.0:9091, the container port named admin" "provider.clientSecret" "${GATEHOUSE_CLIENT_SECRET} from the Secret: give secret.clientSecret or existingSecret" "provider.privateKey" "${GATEHOUSE_PRIVATE_KEY} from the Secret: give secret.privateKey or existingSecret" "session.encryptionKeys" "${GATEHOUSE_SESSION_KEY}... from the Secret: give secret.sessionKeys or existingSecret" "assertion.signingKeys" "${GATEHOUSE_ASSERTION_KEY}... from the Secret: give secret.assertionKeys or existingSecretKeys.assertionKeys" -}}
{{- $path := splitList "." $key -}}
{{- $section := get $.Values.config (first $path) -}}
{{- if or (and (eq (len $path) 1) (hasKey $.Values.config $key)) (and (eq (len $path) 2) (kindIs "map" $section) (hasKey (default dict $section) (last $path))) -}}
{{- fail (printf "config.%s is set by the chart (%s): remove it from the values" $key $why) -}}
{{- end -}}
{{- end -}}
{{- if not .Values.existingSecret -}}
{{- $method := include "gatehouse.clientAuthMethod" . -}}
{{- if and (has $method (list "client_secret_post" "client_secret_basic")) (not .Values.secret.clientSecret) -}}
{{- fail (printf "secret.clientSecret is required with clientAuthMethod %s (or name a Secret in existingSecret)" $method) -}}
{{- end -}}
{{- if and (eq $method "private_key_jwt") (not .Values.secret.privateKey) -}}
{{- fail "secret.privateKey is required with clientAuthMethod private_key_jwt (or name a Secret in existingSecret)" -}}
{{- end -}}
{{- if not .Values.secret.sessionKeys -}}
{{- fail "secret.sessionKeys needs at least one key (openssl rand -base64 32), or name a Secret in existingSecret" -}}
{{- end -}}
{{- else if not .Values.existingSecretKeys.sessionKeys -}}
{{- fail "existingSecretKeys.sessionKeys needs at least one key name of the Secret in existingSecret" -}}
{{- end -}}
{{- end -}}

{{/*
The gateway's config file: config from the values, with the listeners the
probes and Services expect, the store, and every secret as a ${VAR}
reference to the environment the Deployment fills from the Secret.
*/}}
{{- define "gatehouse.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $server := get $config "server" | default dict -}}
{{- $_ := set $server "host" "0.0.0.0" -}}
{{- $_ := set $server "port" 8080 -}}
{{- $_ := set $config "server" $server -}}
{{- $admin := dict "host" "0.0.0.0" "port" 9091 -}}
{{- if include "gatehouse.adminTokenKey" . -}}{{- $_ := set $admin "token" "${GATEHOUSE_ADMIN_TOKEN}" -}}{{- end -}}
{{- $_ := set $config "admin" $admin -}}
{{- $assertionKeys := list -}}
{{- range $index, $_ := include "gatehouse.assertionKeyNames" . | fromJsonArray -}}
{{- $assertionKeys = append $assertionKeys (printf "${%s}" (include "gatehouse.assertionKeyEnv" $index)) -}}
{{- end -}}
{{- if $assertionKeys -}}
{{- $assertion := get $config "assertion" | default dict -}}
{{- $_ := set $assertion "signingKeys" $assertionKeys -}}
{{- $_ := set $config "assertion" $assertion -}}
{{- end -}}
{{- if not (get $config "upstream") -}}{{- $_ := unset $config "upstream" -}}{{- end -}}
{{- $provider := get $config "provider" | default dict -}}
{{- range $key := list "issuer" "authorizationEndpoint" "tokenEndpoint" "userinfoEndpoint" "revocationEndpoint" "endSessionEndpoint" -}}
{{- if not (get $provider $key) -}}{{- $_ := unset $provider $key -}}{{- end -}}
{{- end -}}
{{- $method := include "gatehouse.clientAuthMethod" . -}}
{{- $_ := unset $provider "clientSecret" -}}
{{- $_ := unset $provider "privateKey" -}}
{{- if has $method (list "client_secret_post" "client_secret_basic") -}}
{{- $_ := set $provider "clientSecret" "${GATEHOUSE_CLIENT_SECRET}" -}}
{{- else if eq $method "private_key_jwt" -}}
{{- $_ := set $provider "privateKey" "${GATEHOUSE_PRIVATE_KEY}" -}}
{{- end -}}
{{- $_ := set $config "provider" $provider -}}
{{- range $name, $entry := (get $config "providers" | default dict) -}}
{{- $_ := unset $entry "clientSecret" -}}
{{- $_ := unset $entry "privateKey" -}}
{{- $ref := get $.Values.providerSecrets $name | default dict -}}
{{- if $ref.clientSecretKey -}}{{- $_ := set $entry "clientSecret" (printf "${%s}" (include "gatehouse.providerSecretEnv" (list $name "CLIENT_SECRET"))) -}}{{- end -}}
{{- if $ref.privateKeyKey -}}{{- $_ := set $entry "privateKey" (printf "${%s}" (include "gatehouse.providerSecretEnv" (list $name "PRIVATE_KEY"))) -}}{{- end -}}
{{- end -}}
{{- $session := get $config "session" | default dict -}}
{{- $_ := set $session "store" (include "gatehouse.store" .) -}}
{{- $keys := list -}}
{{- range $index, $_ := include "gatehouse.sessionKeyNames" . | fromJsonArray -}}
{{- $keys = append $keys (printf "${%s}" (include "gatehouse.sessionKeyEnv" $index)) -}}
{{- end -}}
{{- $_ := set $session "encryptionKeys" $keys -}}
{{- $_ := set $config "session" $session -}}
{{- if .Values.forwardAuth.enabled -}}
{{- /* The ingress sends the requests upstream: the gateway proxies nothing, so no token can leave from it. */ -}}
{{- $forwardAuth := get $config "forwardAuth" | default dict -}}
{{- $_ := set $forwardAuth "only" true -}}
{{- $_ := set $config "forwardAuth" $forwardAuth -}}
{{- end -}}
{{- /* Sections in the order of the gateway's documentation, then any other key. */ -}}
{{- $order := list "server" "admin" "provider" "upstream" "routes" "sites" "session" "tokens" "paths" "forwardAuth" "csrf" -}}
{{- range $key := $order -}}
{{- if hasKey $config $key }}
{{ toYaml (dict $key (get $config $key)) -}}
{{- end -}}
{{- end -}}
{{- range $key, $value := $config -}}
{{- if not (has $key $order) }}
{{ toYaml (dict $key $value) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The TCP port of a URL: its explicit port, else the scheme's default (https
443, http 80, redis and rediss 6379). Parsed by hand: a URL holding
${VARIABLE} references is not one Go's url.Parse accepts.
*/}}
{{- define "gatehouse.urlPort" -}}
{{- $url := . -}}
{{- $scheme := regexFind "^[a-zA-Z][a-zA-Z0-9+.-]*" $url | lower -}}
{{- $rest := regexReplaceAll "^[a-zA-Z][a-zA-Z0-9+.-]*://" $url "" -}}
{{- $rest = regexReplaceAll "^[^/?#]*@" $rest "" -}}
{{- $hostport := regexReplaceAll "[/?#].*$" $rest "" -}}
{{- $port := regexFind ":[0-9]+$" $hostport | trimPrefix ":" -}}
{{- if $port -}}{{ $port }}
{{- else if eq $scheme "https" -}}443
{{- else if eq $scheme "http" -}}80
{{- else if hasPrefix "redis" $scheme -}}6379
{{- end -}}
{{- end -}}

{{/*
Ports of the upstreams the gateway proxies to, one per line: each route's
upstream when config.routes is given (config.upstream is then unused), else
config.upstream; and each site's routes' upstreams.
*/}}
{{- define "gatehouse.upstreamPorts" -}}
{{- $routes := dig "routes" list .Values.config -}}
{{- if $routes -}}
{{- range $routes -}}
{{- with .upstream }}
{{ include "gatehouse.urlPort" . }}
{{- end -}}
{{- end -}}
{{- else -}}
{{- with .Values.config.upstream }}
{{ include "gatehouse.urlPort" . }}
{{- end -}}
{{- end -}}
{{- /* Each site's routes too (README "Several sites"). */ -}}
{{- range (dig "sites" list .Values.config) -}}
{{- range .routes -}}
{{- with .upstream }}
{{ include "gatehouse.urlPort" . }}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Ports of the authorization server's URLs the gateway itself calls, one per line. */}}
{{- define "gatehouse.providerPorts" -}}
{{- $provider := .Values.config.provider | default dict -}}
{{- range $key := list "issuer" "tokenEndpoint" "userinfoEndpoint" "revocationEndpoint" -}}
{{- with get $provider $key }}
{{ include "gatehouse.urlPort" . }}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The gateway's own paths, as a JSON list: what the Ingress sends to it in
forward-auth mode (the controller asks /forward-auth about every other path).
*/}}
{{- define "gatehouse.ownPaths" -}}
{{- $paths := .Values.config.paths | default dict -}}
{{- $own := list -}}
{{- range $key, $default := dict "login" "/login" "callback" "/callback" "logout" "/logout" "session" "/session" "signedOut" "/signed-out" "backchannelLogout" "/backchannel-logout" -}}
{{- $own = append $own (get $paths $key | default $default) -}}
{{- end -}}
{{- /* With sites, a site takes its hand-off code at paths.handoff (README "Several sites"). */ -}}
{{- if .Values.config.sites -}}
{{- $own = append $own (get $paths "handoff" | default "/.gatehouse/handoff") -}}
{{- end -}}
{{- $own | sortAlpha | toJson -}}
{{- end -}}

{{/*
The container environment of the gateway and of its check init container:
LOG_LEVEL, TMPDIR, every secret the config references (from the Secret),
tracing, extraEnv.
*/}}
{{- define "gatehouse.env" -}}
{{- $secretName := include "gatehouse.secretName" . -}}
{{- $keys := .Values.existingSecretKeys -}}
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: TMPDIR
  value: /tmp
{{- $method := include "gatehouse.clientAuthMethod" . }}
{{- if has $method (list "client_secret_post" "client_secret_basic") }}
- name: GATEHOUSE_CLIENT_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ $secretName }}
      key: {{ ternary $keys.clientSecret "client-secret" (not (empty .Values.existingSecret)) }}
{{- else if eq $method "private_key_jwt" }}
- name: GATEHOUSE_PRIVATE_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $secretName }}
      key: {{ ternary $keys.privateKey "private-key" (not (empty .Values.existingSecret)) }}
{{- end }}
{{- range $name, $ref := .Values.providerSecrets }}
{{- if $ref.clientSecretKey }}
- name: {{ include "gatehouse.providerSecretEnv" (list $name "CLIENT_SECRET") }}
  valueFrom:
    secretKeyRef:
      name: {{ $ref.secretName }}
      key: {{ $ref.clientSecretKey }}
{{- end }}
{{- if $ref.privateKeyKey }}
- name: {{ include "gatehouse.providerSecretEnv" (list $name "PRIVATE_KEY") }}
  valueFrom:
    secretKeyRef:
      name: {{ $ref.secretName }}
      key: {{ $ref.privateKeyKey }}
{{- end }}
{{- end }}
{{- with include "gatehouse.adminTokenKey" . }}
- name: GATEHOUSE_ADMIN_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ $secretName }}
      key: {{ . }}
{{- end }}
{{- range $index, $key := include "gatehouse.assertionKeyNames" . | fromJsonArray }}
- name: {{ include "gatehouse.assertionKeyEnv" $index }}
  valueFrom:
    secretKeyRef:
      name: {{ $secretName }}
      key: {{ $key }}
{{- end }}
{{- range $index, $key := include "gatehouse.sessionKeyNames" . | fromJsonArray }}
- name: {{ include "gatehouse.sessionKeyEnv" $index }}
  valueFrom:
    secretKeyRef:
      name: {{ $secretName }}
      key: {{ $key }}
{{- end }}
{{- with .Values.tracing }}
{{- if .otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .otlpEndpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ .protocol | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ .serviceName | quote }}
{{- end }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}
