-- 020: the embedded OAuth 2.1 authorization server (bridge/oauth): clients,
-- grants, pending authorization requests, refresh tokens and signing keys.
-- Times are Unix milliseconds; 0 means "not yet". See store/oauth.go.
CREATE TABLE oauth_clients (
    id              TEXT    PRIMARY KEY, -- random id, or the https URL of a Client ID Metadata Document
    kind            TEXT    NOT NULL,    -- registered | dynamic | metadata
    name            TEXT    NOT NULL,
    secret_hash     BLOB,                -- SHA-256 of the client secret; NULL for a public client
    redirect_uris   TEXT    NOT NULL,    -- JSON array of strings
    grant_types     TEXT    NOT NULL,    -- JSON array of strings
    approved_scopes TEXT    NOT NULL DEFAULT '', -- scopes a clinician approved beyond care.read.user (space-separated)
    approved_by     TEXT    NOT NULL DEFAULT '',
    approved_ms     INTEGER NOT NULL DEFAULT 0,
    metadata        TEXT    NOT NULL DEFAULT '{}', -- the registration or metadata document as received (JSON)
    created_ms      INTEGER NOT NULL,
    fetched_ms      INTEGER NOT NULL DEFAULT 0,  -- metadata kind: when the document was fetched
    disabled_ms     INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE oauth_grants (
    id           TEXT    PRIMARY KEY,
    client_id    TEXT    NOT NULL,
    kind         TEXT    NOT NULL,   -- authorization_code | client_credentials | internal
    subject      TEXT    NOT NULL,   -- the tokens' "sub"
    patient      TEXT    NOT NULL,   -- '' when bound to no patient
    scopes       TEXT    NOT NULL,   -- space-separated
    resource     TEXT    NOT NULL,   -- RFC 8707 resource: the tokens' "aud"
    consent      TEXT    NOT NULL DEFAULT '', -- how it was consented to, e.g. "link code on the consent page"
    created_ms   INTEGER NOT NULL,
    revoked_ms   INTEGER NOT NULL DEFAULT 0,
    revoked_by   TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX oauth_grants_client ON oauth_grants (client_id);
CREATE INDEX oauth_grants_patient ON oauth_grants (patient);
CREATE TABLE oauth_auth_requests (
    id          TEXT    PRIMARY KEY,
    client_id   TEXT    NOT NULL,
    request     TEXT    NOT NULL,   -- JSON: the validated authorization request
    csrf        TEXT    NOT NULL,   -- the consent form's anti-forgery value
    patient     TEXT    NOT NULL DEFAULT '', -- set when a link code was redeemed on the consent page
    grant_id    TEXT    NOT NULL DEFAULT '', -- set when the person confirmed
    code_hash   BLOB,               -- SHA-256 of the authorization code, once issued
    created_ms  INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL
);
CREATE UNIQUE INDEX oauth_auth_requests_code ON oauth_auth_requests (code_hash);
CREATE INDEX oauth_auth_requests_expiry ON oauth_auth_requests (expires_ms);
CREATE TABLE oauth_refresh_tokens (
    hash        BLOB    PRIMARY KEY, -- SHA-256 of the refresh token
    grant_id    TEXT    NOT NULL,
    created_ms  INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL,
    used_ms     INTEGER NOT NULL DEFAULT 0 -- set at rotation; presenting a used token revokes the grant
);
CREATE INDEX oauth_refresh_tokens_grant ON oauth_refresh_tokens (grant_id);
CREATE TABLE oauth_keys (
    kid         TEXT    PRIMARY KEY,
    alg         TEXT    NOT NULL,    -- ES256
    private_key BLOB    NOT NULL,    -- PKCS#8 DER, sealed under the store's envelope when it has one
    sealed      INTEGER NOT NULL,
    created_ms  INTEGER NOT NULL
);
