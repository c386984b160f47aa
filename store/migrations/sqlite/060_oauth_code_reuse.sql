-- 060: the authorization code a grant's first tokens were exchanged for
-- (SHA-256), kept with the grant so that a second use of that code revokes
-- the grant (OAuth 2.1 §4.1.3, RFC 6749 §4.1.2; store/oauth.go). NULL for a
-- grant whose code was never exchanged and for grants of other kinds.
ALTER TABLE oauth_grants ADD COLUMN code_hash BLOB;
CREATE UNIQUE INDEX oauth_grants_code ON oauth_grants (code_hash);
