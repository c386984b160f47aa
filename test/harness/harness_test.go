package harness

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTestCA_SignatureVerifiesAgainstTheChainLikeAlexaVerifiers checks what
// the server's verifier will check: the chain builds to the root, the leaf
// names echo-api.amazon.com, and Signature-256 verifies over the raw body —
// and does not after one flipped byte.
func TestTestCA_SignatureVerifiesAgainstTheChainLikeAlexaVerifiers(t *testing.T) {
	t.Parallel()
	ca, err := NewTestCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	chainPEM, err := os.ReadFile(ca.ChainPEM)
	if err != nil {
		t.Fatal(err)
	}
	var certs []*x509.Certificate
	for rest := chainPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	rootPEM, _ := os.ReadFile(ca.RootPEM)
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(rootPEM) {
		t.Fatal("root PEM did not parse")
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, DNSName: "echo-api.amazon.com", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Fatalf("leaf does not verify to the root for echo-api.amazon.com: %v", err)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: x509.NewCertPool(), DNSName: "echo-api.amazon.com"}); err == nil {
		t.Fatal("leaf verified against an empty root pool")
	}
	body := []byte(`{"version":"1.0","note":"déjà vu"}`)
	sig, err := base64.StdEncoding.DecodeString(ca.Sign(body))
	if err != nil {
		t.Fatal(err)
	}
	pub := certs[0].PublicKey.(*rsa.PublicKey)
	sum := sha256.Sum256(body)
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		t.Fatalf("signature does not verify: %v", err)
	}
	body[3] ^= 1
	sum = sha256.Sum256(body)
	if rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) == nil {
		t.Fatal("signature verified over a flipped byte")
	}
}

const fixtureModel = `{"interactionModel":{"languageModel":{"invocationName":"care notes",
 "intents":[{"name":"CarePlanIntent","slots":[{"name":"topic","type":"TopicType"}],"samples":["about {topic}"]}],
 "types":[{"name":"TopicType","values":[{"id":"weight_bearing","name":{"value":"walking","synonyms":["crutches","frame"]}}]}]}}}`

func TestModelSlot_ResolvesSynonymsAndReportsNoMatch(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "en-US.json")
	if err := os.WriteFile(p, []byte(fixtureModel), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := LoadModel(p)
	if err != nil {
		t.Fatal(err)
	}
	status := func(s map[string]any) (string, string) {
		b, _ := json.Marshal(s)
		var v struct {
			Resolutions struct {
				ResolutionsPerAuthority []struct {
					Status struct{ Code string }
					Values []struct{ Value struct{ ID, Name string } }
				}
			}
		}
		_ = json.Unmarshal(b, &v)
		a := v.Resolutions.ResolutionsPerAuthority[0]
		id := ""
		if len(a.Values) > 0 {
			id = a.Values[0].Value.ID
		}
		return a.Status.Code, id
	}
	s, err := m.Slot("CarePlanIntent", "topic", "Crutches")
	if err != nil {
		t.Fatal(err)
	}
	if code, id := status(s); code != "ER_SUCCESS_MATCH" || id != "weight_bearing" {
		t.Errorf("crutches: %s %s, want ER_SUCCESS_MATCH weight_bearing", code, id)
	}
	s, _ = m.Slot("CarePlanIntent", "topic", "the moon")
	if code, id := status(s); code != "ER_SUCCESS_NO_MATCH" || id != "" {
		t.Errorf("the moon: %s %q, want ER_SUCCESS_NO_MATCH", code, id)
	}
	if _, err := m.Slot("CarePlanIntent", "nope", "x"); err == nil {
		t.Error("unknown slot: no error")
	}
}

func TestPlainSSML_UnescapesAndStripsTags(t *testing.T) {
	t.Parallel()
	got := PlainSSML(`<speak>Stop — <break time="300ms"/>I told you: “Tom &amp; Jerry &lt;3”</speak>`)
	if want := "Stop — I told you: “Tom & Jerry <3”"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestEnv_DropsCallerUnsayVariables(t *testing.T) {
	t.Setenv("UNSAY_DB", "/somewhere/else.db")
	env := strings.Join(Env("X=1"), "\n")
	if strings.Contains(env, "UNSAY_DB=") {
		t.Error("UNSAY_DB leaked into the server environment")
	}
	if !strings.Contains(env, "UNSAY_WRITE_SECRET="+WriteSecret) || !strings.Contains(env, "\nX=1") {
		t.Error("harness secrets or extra missing")
	}
}

func TestWalkingSentence_FindsTheWeightBearingQuote(t *testing.T) {
	t.Parallel()
	s := "Your exercise instruction from Sarah: “Ankle pumps hourly.” Your walking instruction: “Partial weight-bearing.”"
	if got := WalkingSentence(s); got != "Partial weight-bearing." {
		t.Errorf("got %q", got)
	}
	if got := WalkingSentence("nothing quoted"); got != "" {
		t.Errorf("got %q", got)
	}
}

// The golden transcript keeps every word and writes only what varies run
// to run as a placeholder.
func TestDemoGolden_NormalizesOnlyWhatVariesFromRunToRun(t *testing.T) {
	t.Parallel()
	d := &Demo{Turns: []Turn{
		{Who: "server", Text: "unsay serve on http://127.0.0.1:45265 (SQLite /tmp/unsay-demo-1/unsay.db, demo seed)"},
		{Who: "carer", Text: "unsay link --patient ray → code 566627"},
		{Who: "Alexa", Text: "Sarah Okafor, physio, changed it just now: “Full weight-bearing as tolerated.”"},
		{Who: "Alexa", Text: "Sarah Okafor, physio, 12 seconds ago. Mr Adeyemi, surgical team, two days ago."},
		{Who: "Alexa", Text: "Nine days ago, Dr Mensah, GP, wrote: “Rivaroxaban 10 mg once a day, for a course due to end on 27 November 2026.” Day 5."},
	}}
	want := `server: unsay serve on http://127.0.0.1:PORT (SQLite DIR/unsay.db, demo seed)
carer: unsay link --patient ray → code CODE
Alexa: Sarah Okafor, physio, changed it {age}: “Full weight-bearing as tolerated.”
Alexa: Sarah Okafor, physio, {age}. Mr Adeyemi, surgical team, two days ago.
Alexa: Nine days ago, Dr Mensah, GP, wrote: “Rivaroxaban 10 mg once a day, for a course due to end on {date}.” Day 5.
`
	if got := d.Golden(); got != want {
		t.Errorf("Golden() =\n%s\nwant\n%s", got, want)
	}
}
