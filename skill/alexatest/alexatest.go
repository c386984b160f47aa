// Package alexatest signs Alexa requests the way Alexa does, with a test
// certificate authority, so whole-program tests, the demo and benchmarks can
// drive POST /alexa with verification ON (P-22): a root CA, a leaf with SAN
// echo-api.amazon.com, Signature-256 (RSA SHA-256 over the raw body), and
// request envelopes shaped like an Echo Show's.
//
// It is for tests and the demo only; production verification trusts only
// the system roots plus --alexa-roots.
package alexatest

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/unsay/unsay/skill"
)

// CertURL is the certificate chain URL the test requests name; a server
// under test maps it to the chain file with --alexa-cert CertURL=FILE.
const CertURL = "https://s3.amazonaws.com/echo.api/unsay-test-cert.pem"

// PKI is a test root and a signing leaf (SAN echo-api.amazon.com).
type PKI struct {
	RootPEM  []byte // the trust anchor (--alexa-roots)
	ChainPEM []byte // leaf then root, as served at CertURL (--alexa-cert)
	Root     *x509.Certificate
	key      *rsa.PrivateKey
}

// NewPKI makes a fresh RSA-2048 root and leaf valid from an hour ago for
// 30 days. Errors only if key generation fails.
func NewPKI() (*PKI, error) {
	now := time.Now()
	rootKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	leafKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	rootT := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Unsay Alexa Test Root"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(30 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	rootDER, err := x509.CreateCertificate(rand.Reader, rootT, rootT, &rootKey.PublicKey, rootKey)
	if err != nil {
		return nil, fmt.Errorf("root: %w", err)
	}
	root, _ := x509.ParseCertificate(rootDER)
	leafT := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "echo-api.amazon.com"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(30 * 24 * time.Hour), DNSNames: []string{"echo-api.amazon.com"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafT, root, &leafKey.PublicKey, rootKey)
	if err != nil {
		return nil, fmt.Errorf("leaf: %w", err)
	}
	enc := func(der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}) }
	return &PKI{RootPEM: enc(rootDER), ChainPEM: append(enc(leafDER), enc(rootDER)...), Root: root, key: leafKey}, nil
}

// WriteFiles writes root.pem and chain.pem into dir and returns their paths.
func (p *PKI) WriteFiles(dir string) (rootFile, chainFile string, err error) {
	rootFile, chainFile = filepath.Join(dir, RootFile), filepath.Join(dir, ChainFile)
	if err = os.WriteFile(rootFile, p.RootPEM, 0o600); err == nil {
		err = os.WriteFile(chainFile, p.ChainPEM, 0o600)
	}
	return rootFile, chainFile, err
}

// Sign returns the Signature-256 header value for body.
func (p *PKI) Sign(body []byte) string {
	sum := sha256.Sum256(body)
	sig, err := rsa.SignPKCS1v15(rand.Reader, p.key, crypto.SHA256, sum[:])
	if err != nil {
		panic("alexatest: sign: " + err.Error()) // cannot happen with a valid RSA key
	}
	return base64.StdEncoding.EncodeToString(sig)
}

// Device is one Echo device of one Alexa user in one skill session.
type Device struct {
	SkillID   string
	UserID    string
	DeviceID  string
	SessionID string
	APL       bool   // an Echo Show: supportedInterfaces lists Alexa.Presentation.APL
	Endpoint  string // apiEndpoint; default https://api.eu.amazonalexa.com
	Clock     func() time.Time
	seq       int
}

// Request types and arguments for Build.
type Request struct {
	Type      string         // skill.TypeLaunch etc.; default LaunchRequest
	Intent    string         // for IntentRequest
	Slots     map[string]any // name → slot object
	Arguments []any          // for Alexa.Presentation.APL.UserEvent
	Token     string         // APL document token for UserEvent
	NewSess   bool           // session.new
}

// Build returns the JSON envelope of r from d.
func (d *Device) Build(r Request) []byte {
	if r.Type == "" {
		r.Type = "LaunchRequest"
	}
	now := time.Now
	if d.Clock != nil {
		now = d.Clock
	}
	endpoint := d.Endpoint
	if endpoint == "" {
		endpoint = "https://api.eu.amazonalexa.com"
	}
	d.seq++
	req := map[string]any{"type": r.Type, "requestId": fmt.Sprintf("amzn1.echo-api.request.%s.%d", d.SessionID, d.seq),
		"timestamp": now().UTC().Format(time.RFC3339), "locale": "en-GB"}
	switch r.Type {
	case "IntentRequest":
		slots := r.Slots
		if slots == nil {
			slots = map[string]any{}
		}
		req["intent"] = map[string]any{"name": r.Intent, "confirmationStatus": "NONE", "slots": slots}
		req["dialogState"] = "COMPLETED"
	case "SessionEndedRequest":
		req["reason"] = "USER_INITIATED"
	case "Alexa.Presentation.APL.UserEvent":
		req["arguments"] = r.Arguments
		req["token"] = r.Token
		req["source"] = map[string]any{"type": "TouchWrapper", "handler": "Press"}
	}
	ifaces := map[string]any{}
	if d.APL {
		ifaces["Alexa.Presentation.APL"] = map[string]any{"runtime": map[string]any{"maxVersion": "2024.3"}}
	}
	app := map[string]any{"applicationId": d.SkillID}
	user := map[string]any{"userId": d.UserID}
	env := map[string]any{
		"version": "1.0",
		"session": map[string]any{"new": r.NewSess || r.Type == "LaunchRequest", "sessionId": d.SessionID, "application": app, "user": user},
		"context": map[string]any{"System": map[string]any{"application": app, "user": user,
			"device": map[string]any{"deviceId": d.DeviceID, "supportedInterfaces": ifaces}, "apiEndpoint": endpoint}},
		"request": req,
	}
	b, _ := json.Marshal(env)
	return b
}

// CodeSlot is a LinkDeviceIntent code slot (AMAZON.NUMBER).
func CodeSlot(code string) map[string]any {
	return map[string]any{"code": map[string]any{"name": "code", "value": code, "confirmationStatus": "NONE"}}
}

// Client POSTs signed requests to an /alexa endpoint.
type Client struct {
	URL  string       // e.g. http://127.0.0.1:8080/alexa
	PKI  *PKI         // nil sends no signature headers (verification off)
	HTTP *http.Client // nil: a client with a 10 s timeout
}

// Turn is one answered request.
type Turn struct {
	Status   int
	Raw      []byte
	Response skill.ResponseEnvelope
}

// Speech is the outputSpeech SSML with tags removed and entities decoded:
// what Ray hears.
func (t Turn) Speech() string {
	if t.Response.Response.OutputSpeech == nil {
		return ""
	}
	return StripSSML(t.Response.Response.OutputSpeech.SSML)
}

var tagRE = regexp.MustCompile(`<[^>]*>`)

// StripSSML removes tags and decodes the five XML entities.
func StripSSML(s string) string {
	s = tagRE.ReplaceAllString(s, " ")
	s = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&quot;", `"`, "&apos;", "'", "&amp;", "&").Replace(s)
	return strings.Join(strings.Fields(s), " ")
}

// Do signs body (when PKI is set) and posts it.
func (c *Client) Do(body []byte) (Turn, error) {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequest(http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return Turn{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.PKI != nil {
		req.Header.Set("SignatureCertChainUrl", CertURL)
		req.Header.Set("Signature-256", c.PKI.Sign(body))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Turn{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Turn{}, err
	}
	t := Turn{Status: resp.StatusCode, Raw: raw}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &t.Response); err != nil {
			return t, fmt.Errorf("response is not an Alexa envelope: %w", err)
		}
	}
	return t, nil
}

// File names of a test CA saved by Save and read by Load.
const (
	RootFile  = "alexa-root.pem"     // the trust anchor: serve --alexa-roots
	ChainFile = "alexa-chain.pem"    // leaf then root: serve --alexa-cert CertURL=…
	KeyFile   = "alexa-leaf-key.pem" // the leaf's private key (PKCS #8), for signing
)

// Save writes the root, the chain and the leaf's private key into dir (0600
// files), so another process — `unsay ask --alexa-test-ca DIR` — can sign
// with this CA later.
func (p *PKI) Save(dir string) error {
	if _, _, err := p.WriteFiles(dir); err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(p.key)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, KeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// Load reads a test CA saved by Save. Errors name the file.
func Load(dir string) (*PKI, error) {
	read := func(name string) (*pem.Block, []byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, nil, err
		}
		blk, _ := pem.Decode(b)
		if blk == nil {
			return nil, nil, fmt.Errorf("%s: no PEM block", filepath.Join(dir, name))
		}
		return blk, b, nil
	}
	rootBlk, rootPEM, err := read(RootFile)
	if err != nil {
		return nil, err
	}
	_, chainPEM, err := read(ChainFile)
	if err != nil {
		return nil, err
	}
	keyBlk, _, err := read(KeyFile)
	if err != nil {
		return nil, err
	}
	root, err := x509.ParseCertificate(rootBlk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, RootFile), err)
	}
	k, err := x509.ParsePKCS8PrivateKey(keyBlk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, KeyFile), err)
	}
	key, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an RSA key", filepath.Join(dir, KeyFile))
	}
	return &PKI{RootPEM: rootPEM, ChainPEM: chainPEM, Root: root, key: key}, nil
}
