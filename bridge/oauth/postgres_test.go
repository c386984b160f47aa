package oauth

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, to make a schema
	"golang.org/x/oauth2"

	"github.com/unsay/unsay/bridge/auth"
	"github.com/unsay/unsay/store"
)

// pgSchemaDSN makes an empty schema in UNSAY_TEST_POSTGRES, dropped at
// cleanup; it skips without the variable (fails under UNSAY_REQUIRE_ALL=1).
func pgSchemaDSN(t *testing.T) string {
	t.Helper()
	base := os.Getenv("UNSAY_TEST_POSTGRES")
	if base == "" {
		if os.Getenv("UNSAY_REQUIRE_ALL") == "1" {
			t.Fatal("UNSAY_TEST_POSTGRES is not set (UNSAY_REQUIRE_ALL=1)")
		}
		t.Skip("SKIPPED: Postgres — set UNSAY_TEST_POSTGRES=postgres://…")
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	schema := "unsay_oauth_" + hex.EncodeToString(b)
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		admin.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		_, _ = admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`)
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema
}

// TestPostgres_TwoInstancesShareClientsGrantsCodesAndKeys: behind one
// public URL, the authorization request starts on instance A, the consent
// page and the code exchange happen on instance B, the refresh on A, and a
// revocation through B is refused by A's resource server on the next
// request — all state is in the shared database, and both instances sign
// with, and trust, the same keys.
func TestPostgres_TwoInstancesShareClientsGrantsCodesAndKeys(t *testing.T) {
	dsn := pgSchemaDSN(t)
	ctx := context.Background()
	type instance struct {
		st  *store.Store
		as  *Server
		srv *httptest.Server
		rs  *auth.Verifier
	}
	// One public URL (a load balancer in front); each instance on its own socket.
	lb := httptest.NewUnstartedServer(nil)
	issuer := "http://" + lb.Listener.Addr().String()
	var insts [2]*instance
	for i := range insts {
		st, err := store.Open(ctx, store.Options{DSN: dsn, AuditKey: []byte("k")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		as, err := New(ctx, Config{Store: st, Issuer: issuer, RegistrationsPerHour: -1})
		if err != nil {
			t.Fatal(err)
		}
		r := chi.NewRouter()
		as.Routes(r)
		srv := httptest.NewServer(r)
		t.Cleanup(srv.Close)
		rs, err := auth.NewVerifier(auth.Config{JWKS: as.KeySource(), Issuer: issuer, GrantActive: as.GrantActive, PublicURL: issuer})
		if err != nil {
			t.Fatal(err)
		}
		insts[i] = &instance{st: st, as: as, srv: srv, rs: rs}
	}
	// The "load balancer" sends each request to the instance the test picks.
	var target atomic.Pointer[instance]
	target.Store(insts[0])
	lb.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := url.Parse(target.Load().srv.URL)
		httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
	})
	lb.Start()
	t.Cleanup(lb.Close)

	id, _, err := RegisterClient(ctx, insts[0].st, "shared", []string{redirectURI}, nil, true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, st: insts[1].st, as: insts[1].as, srv: lb}
	conf := f.config(id, "")
	v := oauth2.GenerateVerifier()
	authURL := conf.AuthCodeURL("s", oauth2.S256ChallengeOption(v))
	target.Store(insts[0])
	p := f.authorize(authURL) // the request is stored by A …
	target.Store(insts[1])
	p = f.post(p, map[string][]string{"action": {"code"}, "code": {f.linkCode("ray")}}) // … consented to on B
	p = f.post(p, map[string][]string{"action": {"allow"}})
	u := mustURL(t, p.location)
	tok, err := conf.Exchange(ctx, u.Query().Get("code"), oauth2.VerifierOption(v)) // exchanged on B
	if err != nil {
		t.Fatal(err)
	}
	if _, err := insts[0].rs.Verify(ctx, tok.AccessToken, nil); err != nil {
		t.Fatalf("instance A refused instance B's token: %v", err)
	}
	target.Store(insts[0])
	next, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token() // refreshed on A
	if err != nil {
		t.Fatal(err)
	}
	gs, _ := insts[1].st.OAuthGrants(ctx, store.OAuthGrantFilter{ClientID: id})
	if len(gs) != 1 {
		t.Fatalf("grants %+v", gs)
	}
	if err := insts[1].st.RevokeOAuthGrant(ctx, gs[0].ID, "carer", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := insts[0].rs.Verify(ctx, next.AccessToken, nil); err == nil {
		t.Fatal("instance A accepted a token whose grant instance B revoked")
	}
}
