package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"
)

func testGrant(id string, now time.Time) OAuthGrant {
	return OAuthGrant{ID: id, ClientID: "c1", Kind: GrantAuthorizationCode, Subject: "grant:" + id, Patient: "ray",
		Scopes: []string{"care.read.user"}, Resource: "http://127.0.0.1:8080/mcp", Consent: "link code", CreatedAt: now}
}

func TestOAuthClient_PutKeepsApprovalAndSecretChecksInConstantTime(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	c := OAuthClient{ID: "c1", Kind: ClientRegistered, Name: "Alexa", SecretHash: HashSecret("s3cret"),
		RedirectURIs: []string{"https://pitangui.amazon.com/api/skill/link/M1"}, GrantTypes: []string{"authorization_code", "refresh_token"},
		Metadata: json.RawMessage(`{"client_name":"Alexa"}`), CreatedAt: now}
	if err := s.PutOAuthClient(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.ApproveOAuthClient(ctx, "c1", []string{"care.read.assistant"}, "okafor", now); err != nil {
		t.Fatal(err)
	}
	c.Name = "Alexa (renamed)"
	if err := s.PutOAuthClient(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := s.OAuthClient(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "Alexa (renamed)" || len(got.ApprovedScopes) != 1 || got.ApprovedBy != "okafor" || !got.CreatedAt.Equal(now) {
		t.Fatalf("client after re-put = %+v", got)
	}
	if !got.CheckSecret("s3cret") || got.CheckSecret("s3cre") || got.CheckSecret("") || got.Public() {
		t.Fatal("CheckSecret accepts the wrong secret or refuses the right one")
	}
	if _, err := s.OAuthClient(ctx, "nobody"); !errors.Is(err, ErrOAuthNotFound) {
		t.Fatalf("unknown client: %v", err)
	}
	if err := s.ApproveOAuthClient(ctx, "nobody", nil, "okafor", now); !errors.Is(err, ErrOAuthNotFound) {
		t.Fatalf("approve unknown client: %v", err)
	}
}

func TestOAuthGrant_RevocationIsSeenByTheNextCheckAndDeletesRefreshTokens(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	if err := s.CreateOAuthGrant(ctx, testGrant("g1", now)); err != nil {
		t.Fatal(err)
	}
	if err := s.OAuthGrantRevoked(ctx, "g1"); err != nil {
		t.Fatalf("active grant reported %v", err)
	}
	if err := s.CreateOAuthRefreshToken(ctx, HashSecret("r1"), "g1", now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeOAuthGrant(ctx, "g1", "carer", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.OAuthGrantRevoked(ctx, "g1"); !errors.Is(err, ErrGrantRevoked) {
		t.Fatalf("revoked grant: %v, want ErrGrantRevoked", err)
	}
	if _, err := s.OAuthRefreshTokenGrant(ctx, HashSecret("r1"), now.Add(time.Minute)); !errors.Is(err, ErrOAuthNotFound) {
		t.Fatalf("refresh token of a revoked grant: %v, want ErrOAuthNotFound (deleted)", err)
	}
	if err := s.OAuthGrantRevoked(ctx, "nope"); !errors.Is(err, ErrOAuthNotFound) {
		t.Fatalf("unknown grant: %v", err)
	}
	g, _ := s.OAuthGrant(ctx, "g1")
	if g.Active() || g.RevokedBy != "carer" {
		t.Fatalf("grant after revoke = %+v", g)
	}
	if err := s.CreateOAuthRefreshToken(ctx, HashSecret("r2"), "g1", now, now.Add(time.Hour)); !errors.Is(err, ErrGrantRevoked) {
		t.Fatalf("refresh token for a revoked grant: %v", err)
	}
}

func TestOAuthRefreshToken_RotationIsSingleUseAndReuseRevokesTheGrant(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	if err := s.CreateOAuthGrant(ctx, testGrant("g1", now)); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateOAuthRefreshToken(ctx, HashSecret("r1"), "g1", now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Two rotations of the same token at once: exactly one wins.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.RotateOAuthRefreshToken(ctx, HashSecret("r1"), HashSecret("r2-"+string(rune('a'+i))), now, now.Add(time.Hour))
		}()
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
		} else if !errors.Is(err, ErrRefreshTokenReused) {
			t.Fatalf("rotation error %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d concurrent rotations of one token succeeded, want 1 (%v)", wins, errs)
	}
	// The loser's attempt was a reuse: the whole grant is revoked.
	if err := s.OAuthGrantRevoked(ctx, "g1"); !errors.Is(err, ErrGrantRevoked) {
		t.Fatalf("grant after refresh-token reuse: %v, want revoked", err)
	}
}

func TestOAuthRefreshToken_RotatedTokenWorksOnceThenTheNewOne(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	_ = s.CreateOAuthGrant(ctx, testGrant("g1", now))
	if err := s.CreateOAuthRefreshToken(ctx, HashSecret("r1"), "g1", now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	g, err := s.RotateOAuthRefreshToken(ctx, HashSecret("r1"), HashSecret("r2"), now, now.Add(time.Hour))
	if err != nil || g != "g1" {
		t.Fatalf("rotate = %q, %v", g, err)
	}
	if gr, err := s.OAuthRefreshTokenGrant(ctx, HashSecret("r2"), now); err != nil || gr.ID != "g1" {
		t.Fatalf("new token = %+v, %v", gr, err)
	}
	if _, err := s.RotateOAuthRefreshToken(ctx, HashSecret("r2"), HashSecret("r3"), now, now.Add(time.Hour)); err != nil {
		t.Fatalf("second rotation: %v", err)
	}
	if err := s.OAuthGrantRevoked(ctx, "g1"); err != nil {
		t.Fatalf("honest rotations revoked the grant: %v", err)
	}
	if _, err := s.RotateOAuthRefreshToken(ctx, HashSecret("r9"), HashSecret("r10"), now, now.Add(time.Hour)); !errors.Is(err, ErrOAuthNotFound) {
		t.Fatalf("unknown refresh token: %v", err)
	}
	if _, err := s.RotateOAuthRefreshToken(ctx, HashSecret("r3"), HashSecret("r4"), now.Add(2*time.Hour), now.Add(3*time.Hour)); !errors.Is(err, ErrOAuthNotFound) {
		t.Fatalf("expired refresh token: %v", err)
	}
}

func TestOAuthAuthRequest_StepsHappenOnceInOrderAndExpire(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	r := OAuthAuthRequest{ID: "a1", ClientID: "c1", Request: json.RawMessage(`{"state":"x"}`), CSRF: "k", CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute)}
	if err := s.CreateOAuthAuthRequest(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOAuthAuthRequestGrant(ctx, "a1", "g1"); !errors.Is(err, ErrAuthRequestState) {
		t.Fatalf("grant before a patient: %v", err)
	}
	if err := s.SetOAuthAuthRequestCode(ctx, "a1", HashSecret("code")); !errors.Is(err, ErrAuthRequestState) {
		t.Fatalf("code before a grant: %v", err)
	}
	if err := s.SetOAuthAuthRequestPatient(ctx, "a1", "ray"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOAuthAuthRequestPatient(ctx, "a1", "sue"); !errors.Is(err, ErrAuthRequestState) {
		t.Fatalf("second patient: %v", err)
	}
	if err := s.SetOAuthAuthRequestGrant(ctx, "a1", "g1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOAuthAuthRequestCode(ctx, "a1", HashSecret("code")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOAuthAuthRequestCode(ctx, "a1", HashSecret("code2")); !errors.Is(err, ErrAuthRequestState) {
		t.Fatalf("second code: %v", err)
	}
	got, err := s.OAuthAuthRequestByCode(ctx, HashSecret("code"), now)
	if err != nil || got.Patient != "ray" || got.GrantID != "g1" || !bytes.Equal(got.CodeHash, HashSecret("code")) {
		t.Fatalf("by code = %+v, %v", got, err)
	}
	if _, err := s.OAuthAuthRequest(ctx, "a1", now.Add(10*time.Minute)); !errors.Is(err, ErrOAuthNotFound) {
		t.Fatalf("expired request: %v", err)
	}
	if err := s.DeleteOAuthAuthRequest(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteOAuthAuthRequest(ctx, "a1"); !errors.Is(err, ErrOAuthNotFound) {
		t.Fatalf("second delete (a code exchanged twice): %v", err)
	}
}

// TestOAuthAuthRequest_BindsToTheFirstBrowserOnly: the consent page's
// browser binding (T6) is set by the first browser, kept when the same
// browser comes back, and refused (ErrAuthRequestState, the binding
// unchanged) for another; an absent request is ErrOAuthNotFound and an
// empty hash a ValidationError.
func TestOAuthAuthRequest_BindsToTheFirstBrowserOnly(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	if err := s.CreateOAuthAuthRequest(ctx, OAuthAuthRequest{ID: "b1", ClientID: "c1", Request: json.RawMessage(`{}`), CSRF: "k",
		CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	carer, other := HashSecret("carer"), HashSecret("other")
	if err := s.BindOAuthAuthRequestBrowser(ctx, "b1", carer); err != nil {
		t.Fatalf("first browser: %v", err)
	}
	if err := s.BindOAuthAuthRequestBrowser(ctx, "b1", carer); err != nil {
		t.Fatalf("the same browser again: %v", err)
	}
	if err := s.BindOAuthAuthRequestBrowser(ctx, "b1", other); !errors.Is(err, ErrAuthRequestState) {
		t.Fatalf("another browser: %v, want ErrAuthRequestState", err)
	}
	got, err := s.OAuthAuthRequest(ctx, "b1", now)
	if err != nil || !bytes.Equal(got.BrowserHash, carer) {
		t.Fatalf("binding after another browser tried: %x, %v", got.BrowserHash, err)
	}
	if err := s.BindOAuthAuthRequestBrowser(ctx, "absent", carer); !errors.Is(err, ErrOAuthNotFound) {
		t.Fatalf("absent request: %v", err)
	}
	var ve *ValidationError
	if err := s.BindOAuthAuthRequestBrowser(ctx, "b1", nil); !errors.As(err, &ve) {
		t.Fatalf("empty hash: %v", err)
	}
}

func TestOAuthConsentLinkCode_SingleUseAndSharesTheLimitsOfDeviceLinking(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	code, _, err := s.CreateLinkCode(ctx, "ray", now)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s.RedeemLinkCodeForConsent(ctx, "consent:192.0.2.1", code, now); err != nil || p != "ray" {
		t.Fatalf("redeem = %q, %v", p, err)
	}
	if _, err := s.RedeemLinkCodeForConsent(ctx, "consent:192.0.2.1", code, now); !errors.Is(err, ErrLinkCodeInvalid) {
		t.Fatalf("second use: %v", err)
	}
	if ps, _ := s.LinkedPatients(ctx); len(ps) != 0 {
		t.Fatalf("consent redemption linked an Alexa user: %v", ps)
	}
	fresh, _, _ := s.CreateLinkCode(ctx, "ray", now)
	for i := range LinkMaxFailures - 1 { // one failure was the second use above
		if _, err := s.RedeemLinkCodeForConsent(ctx, "consent:192.0.2.1", "000000", now.Add(time.Duration(i)*time.Second)); !errors.Is(err, ErrLinkCodeInvalid) {
			t.Fatalf("wrong code %d: %v", i, err)
		}
	}
	if _, err := s.RedeemLinkCodeForConsent(ctx, "consent:192.0.2.1", fresh, now.Add(time.Minute)); !errors.Is(err, ErrLinkBlocked) {
		t.Fatalf("right code after five wrong ones: %v, want ErrLinkBlocked", err)
	}
	if p, err := s.RedeemLinkCodeForConsent(ctx, "consent:192.0.2.2", fresh, now.Add(time.Minute)); err != nil || p != "ray" {
		t.Fatalf("another address is not blocked: %q, %v", p, err)
	}
}

func TestOAuthSigningKeys_SealedUnderTheEnvelopeAndOneRotationAtATime(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	k := OAuthKey{KID: "k1", Alg: "ES256", PrivateDER: []byte("der-1"), CreatedAt: now}
	if added, err := s.AddOAuthSigningKey(ctx, k, now.Add(-time.Hour)); err != nil || !added {
		t.Fatalf("first key: %v %v", added, err)
	}
	// A second instance rotating with the same view adds nothing.
	if added, err := s.AddOAuthSigningKey(ctx, OAuthKey{KID: "k1b", Alg: "ES256", PrivateDER: []byte("x"), CreatedAt: now}, now.Add(-time.Hour)); err != nil || added {
		t.Fatalf("concurrent rotation added a key: %v %v", added, err)
	}
	if added, err := s.AddOAuthSigningKey(ctx, OAuthKey{KID: "k2", Alg: "ES256", PrivateDER: []byte("der-2"), CreatedAt: now.Add(time.Hour)}, now); err != nil || !added {
		t.Fatalf("rotation: %v %v", added, err)
	}
	keys, skipped, err := s.OAuthSigningKeys(ctx)
	if err != nil || skipped != 0 || len(keys) != 2 || keys[0].KID != "k2" || string(keys[1].PrivateDER) != "der-1" {
		t.Fatalf("keys = %+v skipped %d %v", keys, skipped, err)
	}
	if n, err := s.DeleteOAuthSigningKeysBefore(ctx, now.Add(2*time.Hour)); err != nil || n != 1 {
		t.Fatalf("retire: %d %v (the newest key always stays)", n, err)
	}
	if keys, _, _ := s.OAuthSigningKeys(ctx); len(keys) != 1 || keys[0].KID != "k2" {
		t.Fatalf("after retiring = %+v", keys)
	}
}

func TestOAuthSigningKeys_AreSealedAtRestWhenTheStoreSeals(t *testing.T) {
	path := testDSN(t)
	sealer := newGCMSealer(t, 7)
	s, err := Open(context.Background(), Options{DSN: path, AuditKey: []byte("k"), Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	now := demoNow(t)
	if _, err := s.AddOAuthSigningKey(ctx, OAuthKey{KID: "k1", Alg: "ES256", PrivateDER: []byte("private-der"), CreatedAt: now}, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	db, _ := tamperDB(t, path)
	defer db.Close()
	var raw []byte
	if err := db.QueryRow(`SELECT private_key FROM oauth_keys`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("private-der")) {
		t.Fatal("the private key is stored in plaintext in a sealed store")
	}
	keys, skipped, err := s.OAuthSigningKeys(ctx)
	if err != nil || skipped != 0 || len(keys) != 1 || string(keys[0].PrivateDER) != "private-der" {
		t.Fatalf("opened keys = %+v skipped %d %v", keys, skipped, err)
	}
}

func BenchmarkOAuthGrantRevoked(b *testing.B) {
	s, _ := openTest(b, nil)
	ctx := context.Background()
	now := time.Now()
	if err := s.CreateOAuthGrant(ctx, testGrant("g1", now)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := s.OAuthGrantRevoked(ctx, "g1"); err != nil {
			b.Fatal(err)
		}
	}
}

// codeRequest stores grant id and a pending authorization request for it
// whose code is code, as the consent page leaves them after Allow.
func codeRequest(t *testing.T, s *Store, id, code string, now time.Time) {
	t.Helper()
	ctx := context.Background()
	if err := s.CreateOAuthGrant(ctx, testGrant("g-"+id, now)); err != nil {
		t.Fatal(err)
	}
	r := OAuthAuthRequest{ID: id, ClientID: "c1", Request: json.RawMessage(`{}`), CSRF: "k", CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute)}
	if err := s.CreateOAuthAuthRequest(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOAuthAuthRequestPatient(ctx, id, "ray"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOAuthAuthRequestGrant(ctx, id, "g-"+id); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOAuthAuthRequestCode(ctx, id, HashSecret(code)); err != nil {
		t.Fatal(err)
	}
}

// TestOAuthCode_ASecondUseRevokesTheGrantTheFirstProduced: OAuth 2.1
// §4.1.3 / RFC 6749 §4.1.2. The exchange stores the refresh token and ends
// the request; the same code again — at the exchange or at the lookup — is
// refused and revokes the grant, its refresh token with it. Twins: a grant
// whose code was used once stays active with its refresh token, and a code
// that was never issued revokes nothing.
func TestOAuthCode_ASecondUseRevokesTheGrantTheFirstProduced(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	codeRequest(t, s, "a1", "code-1", now)
	codeRequest(t, s, "a2", "code-2", now)
	for _, c := range []struct{ id, code, refresh string }{{"a1", "code-1", "r1"}, {"a2", "code-2", "r2"}} {
		got, err := s.OAuthAuthRequestByCode(ctx, HashSecret(c.code), now)
		if err != nil || got.ID != c.id {
			t.Fatalf("pending request of %s = %+v, %v", c.code, got, err)
		}
		g, err := s.ExchangeOAuthCode(ctx, c.id, HashSecret(c.code), HashSecret(c.refresh), now, now.Add(time.Hour))
		if err != nil || g != "g-"+c.id {
			t.Fatalf("first exchange of %s = %q, %v", c.code, g, err)
		}
		if rg, err := s.OAuthRefreshTokenGrant(ctx, HashSecret(c.refresh), now); err != nil || rg.ID != "g-"+c.id {
			t.Fatalf("refresh token of the exchange = %+v, %v", rg, err)
		}
	}

	// code-1 again at the token endpoint's lookup: refused, grant revoked.
	if _, err := s.OAuthAuthRequestByCode(ctx, HashSecret("code-1"), now.Add(time.Minute)); !errors.Is(err, ErrAuthCodeReused) {
		t.Fatalf("second lookup of a used code: %v, want ErrAuthCodeReused", err)
	}
	if err := s.OAuthGrantRevoked(ctx, "g-a1"); !errors.Is(err, ErrGrantRevoked) {
		t.Fatalf("grant of a reused code: %v, want revoked", err)
	}
	if g, _ := s.OAuthGrant(ctx, "g-a1"); g.RevokedBy != RevokedByCodeReuse || !g.RevokedAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("revoked grant = %+v, want revoked by %q at the second use", g, RevokedByCodeReuse)
	}
	if _, err := s.OAuthRefreshTokenGrant(ctx, HashSecret("r1"), now.Add(time.Minute)); !errors.Is(err, ErrOAuthNotFound) {
		t.Fatalf("refresh token of a reused code's grant: %v, want deleted", err)
	}
	// …and at the exchange itself (a request read before the first use ended it).
	if _, err := s.ExchangeOAuthCode(ctx, "a1", HashSecret("code-1"), HashSecret("r1b"), now, now.Add(time.Hour)); !errors.Is(err, ErrAuthCodeReused) {
		t.Fatalf("second exchange: %v, want ErrAuthCodeReused", err)
	}
	if _, err := s.OAuthRefreshTokenGrant(ctx, HashSecret("r1b"), now); !errors.Is(err, ErrOAuthNotFound) {
		t.Fatalf("a second exchange stored a refresh token: %v", err)
	}

	// A code never issued (and a never-issued one at the exchange): not
	// found, and nothing is revoked.
	if _, err := s.OAuthAuthRequestByCode(ctx, HashSecret("never-issued"), now); !errors.Is(err, ErrOAuthNotFound) {
		t.Fatalf("unknown code: %v, want ErrOAuthNotFound", err)
	}
	if _, err := s.ExchangeOAuthCode(ctx, "a2", HashSecret("never-issued"), nil, now, now); !errors.Is(err, ErrOAuthNotFound) {
		t.Fatalf("exchange of an unknown code: %v, want ErrOAuthNotFound", err)
	}
	if err := s.OAuthGrantRevoked(ctx, "g-a2"); err != nil {
		t.Fatalf("the grant of a code used once: %v, want active", err)
	}
	if _, err := s.OAuthRefreshTokenGrant(ctx, HashSecret("r2"), now.Add(time.Minute)); err != nil {
		t.Fatalf("the refresh token of a code used once: %v", err)
	}
}

// TestOAuthCode_AnExpiredUnusedCodeRevokesNothing: a code whose request
// expired before any exchange is not found, at the lookup and at the
// exchange, and its grant (which never produced a token) is not revoked:
// only a code that was exchanged can be reused.
func TestOAuthCode_AnExpiredUnusedCodeRevokesNothing(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	codeRequest(t, s, "a1", "code-1", now)
	late := now.Add(11 * time.Minute)
	if _, err := s.OAuthAuthRequestByCode(ctx, HashSecret("code-1"), late); !errors.Is(err, ErrOAuthNotFound) {
		t.Fatalf("expired code: %v, want ErrOAuthNotFound", err)
	}
	if _, err := s.ExchangeOAuthCode(ctx, "a1", HashSecret("code-1"), HashSecret("r1"), late, late.Add(time.Hour)); !errors.Is(err, ErrOAuthNotFound) {
		t.Fatalf("exchange of an expired code: %v, want ErrOAuthNotFound", err)
	}
	if g, err := s.OAuthGrant(ctx, "g-a1"); err != nil || !g.Active() {
		t.Fatalf("grant of an expired unused code = %+v, %v; want active", g, err)
	}
}

// TestOAuthCode_ConcurrentExchangesOfOneCodeLetOneWinAndRevokeTheGrant:
// eight exchanges of one code at once (on Postgres from two stores, as two
// instances would): exactly one succeeds, every other one is a second use,
// and the grant ends revoked — the winner's refresh token deleted with it.
func TestOAuthCode_ConcurrentExchangesOfOneCodeLetOneWinAndRevokeTheGrant(t *testing.T) {
	ctx := context.Background()
	s1, dsn := openTest(t, nil)
	stores := []*Store{s1}
	if onPostgres() {
		s2, err := Open(ctx, Options{DSN: dsn, AuditKey: []byte("test-audit-key")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s2.Close() })
		stores = append(stores, s2)
	}
	now := demoNow(t)
	codeRequest(t, s1, "a1", "code-1", now)
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = stores[i%len(stores)].ExchangeOAuthCode(ctx, "a1", HashSecret("code-1"), HashSecret("r-"+string(rune('a'+i))), now, now.Add(time.Hour))
		}()
	}
	close(start)
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, ErrAuthCodeReused):
			t.Fatalf("exchange error %v, want nil or ErrAuthCodeReused", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d of %d concurrent exchanges of one code succeeded, want exactly 1 (%v)", wins, n, errs)
	}
	if err := s1.OAuthGrantRevoked(ctx, "g-a1"); !errors.Is(err, ErrGrantRevoked) {
		t.Fatalf("grant after concurrent reuse of its code: %v, want revoked", err)
	}
	for i := range n {
		if _, err := s1.OAuthRefreshTokenGrant(ctx, HashSecret("r-"+string(rune('a'+i))), now); !errors.Is(err, ErrOAuthNotFound) {
			t.Fatalf("refresh token %d survived the revocation: %v", i, err)
		}
	}
}
