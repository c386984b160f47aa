package bridge

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
	"github.com/unsay/unsay/store"
)

// seedClip reads a committed seed clip (store/seeddata).
func seedClip(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../store/seeddata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// movableClock is a server clock a test moves forward.
type movableClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *movableClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *movableClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func readClip(t *testing.T, c *client, uri string) (*mcp.ResourceContents, *mcp.ResourceContents) {
	t.Helper()
	res, err := c.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) != 2 {
		t.Fatalf("read %s: %d contents, want text then blob", uri, len(res.Contents))
	}
	return res.Contents[0], res.Contents[1]
}

func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func TestRead_Blob_SpeakableClipIsTextThenBytesWithItsMimeTypeAndASignedURL(t *testing.T) {
	h := newHarness(t)
	clip := seedClip(t, "exercise_clip.mp3")
	c := h.connect(h.token("speech", userScopes))
	text, blob := readClip(t, c, "care://ray/exercise_clip")
	if text.MIMEType != "text/plain" || text.Text != "A slow count from one to ten, to pace your heel slides." || text.Blob != nil {
		t.Fatalf("text contents = %+v", text)
	}
	if blob.URI != "care://ray/exercise_clip" || blob.MIMEType != models.AudioMPEG || !bytes.Equal(blob.Blob, clip) || blob.Text != "" {
		t.Fatalf("blob contents: uri %q, type %q, %d bytes; want the committed MP3", blob.URI, blob.MIMEType, len(blob.Blob))
	}
	// The same _meta as the text, and the audio keys.
	for k, want := range text.Meta {
		if k == models.MetaRetraction {
			continue
		}
		if got := blob.Meta[k]; got != want {
			t.Errorf("blob _meta %s = %v, text has %v", k, got, want)
		}
	}
	v, _, err := models.DecodeRead(mustURI("care://ray/exercise_clip"), text.Text, text.Meta)
	if err != nil {
		t.Fatal(err)
	}
	a, err := models.DecodeReadAudio(mustURI("care://ray/exercise_clip"), v, blob.MIMEType, blob.Blob, blob.Meta)
	if err != nil {
		t.Fatalf("DecodeReadAudio: %v", err)
	}
	if v.Hash != store.AudioVersionHash(v.PrevHash, v.Value, a.MIMEType, a.SHA256, v.WrittenAt, v.AuthorID) {
		t.Fatal("the versionHash a reader can recompute from the blob does not match")
	}
	if !a.AlexaPlayable || !strings.HasPrefix(a.URL, h.base+"/audio/") || a.URLExpires.Sub(h.st.Now()) > DefaultAudioURLTTL+time.Second {
		t.Fatalf("audio _meta = %+v; want an Alexa clip with a URL on %s expiring within %s", a, h.base, DefaultAudioURLTTL)
	}
	for _, leak := range []string{"ray", "exercise", "okafor"} {
		if strings.Contains(strings.TrimPrefix(a.URL, h.base), leak) {
			t.Errorf("the clip URL names %q: %s", leak, a.URL)
		}
	}
	status, hdr, body := get(t, a.URL)
	if status != http.StatusOK || hdr.Get("Content-Type") != models.AudioMPEG || !strings.HasPrefix(hdr.Get("Cache-Control"), "private") || !bytes.Equal(body, clip) {
		t.Fatalf("GET clip URL = %d %v, %d bytes", status, hdr, len(body))
	}
	if w := binary.BigEndian.Uint32(body); w>>21 != 0x7FF || (w>>19)&3 != 2 || (w>>17)&3 != 1 {
		t.Fatalf("first frame header %08x is not MPEG-2 Layer III", w)
	}
	// The listing says what the resource is, and its size in bytes.
	for _, r := range c.listAll(t) {
		if r.URI == "care://ray/exercise_clip" && (r.MIMEType != models.AudioMPEG || r.Size != int64(len(clip))) {
			t.Fatalf("listing of the clip: mimeType %q, size %d; want audio/mpeg, %d", r.MIMEType, r.Size, len(clip))
		}
	}
}

// P-1, P-2 for blobs: a user-scoped read of the assistant-only clip gets
// the same not-found as an assistant-only text fact; the twin reads it.
func TestRead_Blob_P2_AssistantClipIsNotFoundInTheShapeOfText(t *testing.T) {
	h := newHarness(t)
	user := h.connect(h.token("speech", userScopes))
	for _, uri := range []string{"care-internal://ray/gait_note", "care://ray/gait_note", "care-internal://ray/gait_note/v2", "care-internal://ray/risk"} {
		_, err := user.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		we := wireError(t, err)
		want := NotFoundError(uri)
		if we.Code != want.Code || we.Message != want.Message || string(we.Data) != string(want.Data) {
			t.Fatalf("%s: %d %q %s; want %d %q %s", uri, we.Code, we.Message, we.Data, want.Code, want.Message, want.Data)
		}
	}
	dual := h.connect(h.token("host", dualScopes))
	_, blob := readClip(t, dual, "care-internal://ray/gait_note")
	if blob.MIMEType != models.AudioWAV || !bytes.Equal(blob.Blob, seedClip(t, "gait_note.wav")) {
		t.Fatalf("dual read of gait_note: %q, %d bytes", blob.MIMEType, len(blob.Blob))
	}
	if _, ok := blob.Meta[models.MetaAudioURL]; ok {
		t.Fatalf("an assistant-only clip was given a URL: %v", blob.Meta)
	}
}

// No request obtains a URL for an assistant-only clip: none is minted on
// any read, listing or tool result, and a token forged with the server's
// own key for it is still refused, because /audio reads as care.read.user.
func TestAudioURL_NoRequestObtainsOneForAnAssistantClip(t *testing.T) {
	h := newHarness(t)
	dual := h.connect(h.token("host", dualScopes))
	var wire strings.Builder
	for _, uri := range []string{"care-internal://ray/gait_note", "care-internal://ray/gait_note/v2", "care-internal://ray/gait_note/v1"} {
		res, err := dual.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Contents {
			for k, v := range c.Meta {
				wire.WriteString(k + "=" + toString(v) + "\n")
			}
		}
	}
	for _, r := range dual.listAll(t) {
		wire.WriteString(r.URI + " " + r.Description + "\n")
	}
	tr, err := dual.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whats_changed", Arguments: map[string]any{"since": "2000-01-01T00:00:00Z"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range tr.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			wire.WriteString(tc.Text)
		}
	}
	if strings.Contains(wire.String(), "/audio/") {
		t.Fatalf("a clip URL reached a reader of assistant-only clips:\n%s", wire.String())
	}
	// A token the server's key would mint for gait_note v2 is not served.
	rr, err := h.st.ReadAudio(context.Background(), models.Principal{Subject: "t", Scopes: dualScopes, Patients: []string{"ray"}}, "care-internal://ray/gait_note")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := h.srv.audio.mint(audioGrant{exp: h.st.Now().Add(time.Minute), n: rr.Version.N, hash: rr.Version.Hash, patient: "ray", domain: "gait_note"})
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := get(t, h.base+"/audio/"+tok); status != http.StatusNotFound || bytes.Contains(body, seedClip(t, "gait_note.wav")[100:164]) {
		t.Fatalf("forged URL for gait_note: %d", status)
	}
	// The twin: the same minting for the speakable clip is served.
	ex, _ := h.st.Read(context.Background(), userRayPrincipal(), "care://ray/exercise_clip")
	tok, _ = h.srv.audio.mint(audioGrant{exp: h.st.Now().Add(time.Minute), n: ex.Version.N, hash: ex.Version.Hash, patient: "ray", domain: "exercise_clip"})
	if status, _, _ := get(t, h.base+"/audio/"+tok); status != http.StatusOK {
		t.Fatalf("the twin, exercise_clip: %d", status)
	}
}

func userRayPrincipal() models.Principal {
	return models.Principal{Subject: "t", Scopes: userScopes, Patients: []string{"ray"}}
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}

// A clip URL expires, is bound to its version (not served once the clip is
// revised), and is unforgeable.
func TestAudioURL_ExpiresAndIsBoundToTheCurrentVersion(t *testing.T) {
	clock := &movableClock{now: time.Now().UTC()}
	h := newHarness(t, func(c *Config) { c.Clock = clock.Now; c.AudioURLTTL = 2 * time.Minute })
	c := h.connect(h.token("speech", userScopes))
	urlOf := func() string {
		_, blob := readClip(t, c, "care://ray/exercise_clip")
		u, _ := blob.Meta[models.MetaAudioURL].(string)
		return u
	}
	first := urlOf()
	if status, _, _ := get(t, first); status != http.StatusOK {
		t.Fatalf("fresh URL: %d", status)
	}
	tampered := first[:len(first)-3] + map[bool]string{true: "AAA", false: "BBB"}[!strings.HasSuffix(first, "AAA")]
	if status, _, _ := get(t, tampered); status != http.StatusNotFound {
		t.Fatalf("tampered URL: %d, want 404", status)
	}
	clock.Advance(2*time.Minute + time.Second)
	if status, hdr, _ := get(t, first); status != http.StatusNotFound || hdr.Get("Cache-Control") != "no-store" {
		t.Fatalf("expired URL: %d %q, want 404 no-store", status, hdr.Get("Cache-Control"))
	}
	second := urlOf()
	if second == first {
		t.Fatal("a new read gave the same URL")
	}
	if status, _, _ := get(t, second); status != http.StatusOK {
		t.Fatalf("a new URL after expiry: %d", status)
	}
	// The physio revises the clip: the URL of the old version is dead.
	p := models.Principal{Subject: "okafor", Scopes: []models.Scope{models.ScopeWrite}, Patients: []string{"ray"}}
	clip := seedClip(t, "exercise_clip.mp3")
	clip[len(clip)-1] ^= 0x5A
	if _, err := h.st.Publish(context.Background(), p, store.PublishInput{Patient: "ray", Domain: "exercise_clip", Audience: models.AudienceUser,
		Value: "A slower count from one to ten.", AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio", Audio: clip, AudioType: models.AudioMPEG}); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := get(t, second); status != http.StatusNotFound {
		t.Fatalf("URL of a superseded clip: %d, want 404", status)
	}
	third := urlOf()
	if status, _, body := get(t, third); status != http.StatusOK || !bytes.Equal(body, clip) {
		t.Fatalf("URL of the revised clip: %d", status)
	}
	// A superseded version read by /v{n} carries no URL.
	res, err := c.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "care://ray/exercise_clip/v2"})
	if err != nil || len(res.Contents) != 2 {
		t.Fatalf("read v2: %v", err)
	}
	if _, ok := res.Contents[1].Meta[models.MetaAudioURL]; ok {
		t.Fatal("a superseded clip was given a URL")
	}
}

// A clip re-recorded under the same words is a revision to withdraw on
// every channel: whats_changed carries its retraction (the twin: the same
// clip and words written again is unchanged, and nothing is withdrawn).
func TestWhatsChanged_AClipReRecordedUnderTheSameWordsIsRetracted(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("host", userScopes))
	since := h.st.Now().Add(-time.Second).UTC().Format(time.RFC3339)
	p := models.Principal{Subject: "okafor", Scopes: []models.Scope{models.ScopeWrite}, Patients: []string{"ray"}}
	clip := seedClip(t, "exercise_clip.mp3")
	in := store.PublishInput{Patient: "ray", Domain: "exercise_clip", Audience: models.AudienceUser,
		Value: "A slow count from one to ten, to pace your heel slides.", AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio", Priority: 0.55,
		Audio: clip, AudioType: models.AudioMPEG}
	if res, err := h.st.Publish(context.Background(), p, in); err != nil || !res.Unchanged {
		t.Fatalf("the seed's clip again: %+v, %v; want unchanged", res, err)
	}
	in.Audio = append([]byte(nil), clip...)
	in.Audio[len(in.Audio)-1] ^= 0x5A
	if res, err := h.st.Publish(context.Background(), p, in); err != nil || res.Version.N != 3 {
		t.Fatalf("a re-recording: %+v, %v", res, err)
	}
	tr, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whats_changed", Arguments: map[string]any{"since": since}})
	if err != nil || tr.IsError {
		t.Fatalf("whats_changed: %v %+v", err, tr)
	}
	var text string
	for _, ct := range tr.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if !strings.Contains(text, "Stop — your exercise count has changed.") || !strings.Contains(text, "recorded a new one") {
		t.Fatalf("whats_changed for a re-recorded clip: %s", text)
	}
}
