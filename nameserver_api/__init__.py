"""The name server's REST API seen from its callers: ``client`` (NameServerClient), the typed answers
(``records``) and ``membership`` (one client's flag, heartbeated and watched). Used by the client library, the
broker (its stock clients) and the ops CLI; it never reads the environment's configuration itself."""
