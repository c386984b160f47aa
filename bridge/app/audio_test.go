package app_test

import (
	"crypto/x509"
	"encoding/binary"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/unsay/unsay/bridge/app"
	"github.com/unsay/unsay/skill"
	"github.com/unsay/unsay/skill/alexatest"
)

// testClock is a server clock a test moves forward; Alexa requests are
// stamped from it too, so verification (±150 s) keeps agreeing with it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// mp3Frames decodes every MPEG audio frame header of b, independently of
// the store's parser: it returns the frame count, and fails unless every
// frame is MPEG-2 Layer III at 48 kbps and 24000 Hz, back to back to the end.
func mp3Frames(t *testing.T, b []byte) int {
	t.Helper()
	n := 0
	for off := 0; off < len(b); n++ {
		if len(b)-off < 4 {
			t.Fatalf("frame %d: %d stray bytes", n+1, len(b)-off)
		}
		h := binary.BigEndian.Uint32(b[off:])
		sync, version, layer, bitrate, rate, pad := h>>21, (h>>19)&3, (h>>17)&3, (h>>12)&15, (h>>10)&3, (h>>9)&1
		// ISO/IEC 13818-3: version 0b10 MPEG-2, layer 0b01 Layer III,
		// bit-rate index 6 = 48 kbps, sample-rate index 1 = 24000 Hz.
		if sync != 0x7FF || version != 2 || layer != 1 || bitrate != 6 || rate != 1 {
			t.Fatalf("frame %d at byte %d: header %08x is not MPEG-2 Layer III, 48 kbps, 24000 Hz", n+1, off, h)
		}
		off += 72*48000/24000 + int(pad)
	}
	return n
}

var audioSrc = regexp.MustCompile(`<audio src="([^"]+)"/>`)

// A signed Alexa request for the exercise clip gets SSML whose <audio src>
// is an https URL on the server's public origin; that URL serves an MP3
// Alexa plays (decoded frame by frame here) and stops serving it once it
// expires.
func TestAlexa_PlayClip_SSMLAudioIsAnHTTPSURLOnThePublicOriginThatServesMP3AndExpires(t *testing.T) {
	const public = "https://127.0.0.1:8443" // TLS ends at a proxy in front; the test plays that proxy
	pki, err := alexatest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, chain, err := pki.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{now: time.Now().UTC()}
	a := serveApp(t, app.Config{DB: filepath.Join(dir, "unsay.db"), PublicURL: public, Clock: clock.Now,
		Alexa: skill.Config{SkillID: skillID, Verify: true, DefaultPatient: "ray", ExtraRoots: []*x509.Certificate{pki.Root},
			CertOverrides: map[string]string{alexatest.CertURL: chain}}})
	alexa := &alexatest.Client{URL: "http://" + a.ListenAddr() + "/alexa", PKI: pki}
	dev := &alexatest.Device{SkillID: skillID, UserID: "amzn1.ask.account.ray", DeviceID: "amzn1.ask.device.show", SessionID: "s-1", APL: true, Clock: clock.Now}

	var src, ssml string
	deadline := time.Now().Add(60 * time.Second)
	for src == "" {
		turn, err := alexa.Do(dev.Build(alexatest.Request{Type: skill.TypeIntent, Intent: skill.IntentPlayClip}))
		if err != nil || turn.Status != http.StatusOK {
			t.Fatalf("signed PlayClipIntent: %v %d %s", err, turn.Status, turn.Raw)
		}
		if turn.Response.Response.OutputSpeech != nil {
			ssml = turn.Response.Response.OutputSpeech.SSML
		}
		if m := audioSrc.FindStringSubmatch(ssml); m != nil {
			src = strings.ReplaceAll(m[1], "&amp;", "&")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no <audio> after 60 s; last SSML: %s", ssml)
		}
		time.Sleep(200 * time.Millisecond) // the speech principal is still connecting
	}
	if !strings.HasPrefix(src, public+"/audio/") {
		t.Fatalf("<audio src=%q>: want an https URL on the public origin %s", src, public)
	}
	if !strings.Contains(ssml, "A slow count from one to ten") || strings.Contains(ssml, "gait") {
		t.Fatalf("SSML = %s", ssml)
	}
	viaProxy := "http://" + a.ListenAddr() + strings.TrimPrefix(src, public)
	fetch := func() (int, http.Header, []byte) {
		req, _ := http.NewRequest(http.MethodGet, viaProxy, nil)
		req.Host = "127.0.0.1:8443"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	status, hdr, body := fetch()
	if status != http.StatusOK || hdr.Get("Content-Type") != "audio/mpeg" || !strings.HasPrefix(hdr.Get("Cache-Control"), "private") {
		t.Fatalf("GET the clip: %d %v", status, hdr)
	}
	frames := mp3Frames(t, body)
	if secs := float64(frames*576) / 24000; secs < 8 || secs > 10 || secs > 240 {
		t.Fatalf("the clip lasts %.2f s: want the 9 s count (Alexa: at most 240 s)", secs)
	}
	clock.Advance(5*time.Minute + time.Second)
	if status, _, _ := fetch(); status != http.StatusNotFound {
		t.Fatalf("the clip URL after 5 minutes: %d, want 404 (expired)", status)
	}
}
