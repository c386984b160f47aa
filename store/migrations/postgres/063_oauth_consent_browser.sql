-- 063: the browser a pending authorization request's consent page is bound
-- to: SHA-256 of the random consent cookie the first browser to open the
-- page was given (bridge/oauth/consent.go). NULL until the page is first
-- opened; every code entry, Allow and Deny must present that cookie, so the
-- client that started the request cannot answer it for the person.
ALTER TABLE oauth_auth_requests ADD COLUMN browser_hash BYTEA;
