package bridge

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// DefaultAudioURLTTL is how long a clip URL minted on a resources/read is
// served: 5 minutes — long enough for Alexa to fetch the clip of the
// response it was put in, short enough that a URL that leaks is soon dead.
const DefaultAudioURLTTL = 5 * time.Minute

// audioPath is the route of signed clip URLs: GET|HEAD /audio/{token}.
const audioPath = "/audio/"

// audioTokenAAD binds a clip token to its purpose.
var audioTokenAAD = []byte("unsay/audio-url/v1")

// audioURLs mints and opens the tokens of GET /audio/{token}: AES-256-GCM
// over (expiry, version number, version hash, patient, domain) with a
// random nonce, base64url — opaque (the URL names no patient, fact or
// clinician), unguessable and unforgeable without the key, bound to one
// version's bytes by its chain hash (P-5).
type audioURLs struct {
	aead cipher.AEAD
	ttl  time.Duration
}

// newAudioURLs derives the token key from secret (Config.AudioURLKey; a
// fresh random one when empty, so URLs then work on this instance only).
func newAudioURLs(secret []byte, ttl time.Duration) (*audioURLs, error) {
	if len(secret) == 0 {
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("bridge: audio URL key: %w", err)
		}
	}
	m := hmac.New(sha256.New, secret)
	m.Write(audioTokenAAD)
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, fmt.Errorf("bridge: audio URL key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("bridge: audio URL key: %w", err)
	}
	if ttl <= 0 {
		ttl = DefaultAudioURLTTL
	}
	return &audioURLs{aead: aead, ttl: ttl}, nil
}

// audioGrant is what a token says: serve version n (hash) of
// care://patient/domain until exp.
type audioGrant struct {
	exp     time.Time
	n       int
	hash    string // lowercase hex
	patient string
	domain  string
}

func (a *audioURLs) mint(g audioGrant) (string, error) {
	h, err := hex.DecodeString(g.hash)
	if err != nil || len(h) != sha256.Size {
		return "", errors.New("bridge: audio token: not a version hash")
	}
	pt := binary.BigEndian.AppendUint64(nil, uint64(g.exp.UnixMilli()))
	pt = binary.BigEndian.AppendUint32(pt, uint32(g.n))
	pt = append(pt, h...)
	pt = append(pt, g.patient+"\x00"+g.domain...)
	nonce := make([]byte, a.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("bridge: audio token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(a.aead.Seal(nonce, nonce, pt, audioTokenAAD)), nil
}

// open returns the grant of a token this server minted, or false.
func (a *audioURLs) open(token string) (audioGrant, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	ns := a.aead.NonceSize()
	if err != nil || len(raw) < ns+a.aead.Overhead() {
		return audioGrant{}, false
	}
	pt, err := a.aead.Open(nil, raw[:ns], raw[ns:], audioTokenAAD)
	if err != nil || len(pt) < 8+4+sha256.Size+3 {
		return audioGrant{}, false
	}
	g := audioGrant{
		exp:  time.UnixMilli(int64(binary.BigEndian.Uint64(pt))).UTC(),
		n:    int(binary.BigEndian.Uint32(pt[8:])),
		hash: hex.EncodeToString(pt[12 : 12+sha256.Size]),
	}
	var ok bool
	g.patient, g.domain, ok = strings.Cut(string(pt[12+sha256.Size:]), "\x00")
	return g, ok && models.ValidID(g.patient) && models.ValidID(g.domain) && g.n >= 1
}

// clipURL mints the signed URL at which the current version v of a
// speakable fact serves its clip, and its expiry: only for a user-audience
// version carrying an MP3 Alexa plays (P-1: an assistant-only clip never
// gets one; GET /audio reads through care.read.user alone, so none could
// be served anyway).
func (s *Server) clipURL(v models.Version, now time.Time) (string, time.Time, bool) {
	if v.Audience != models.AudienceUser || v.Audio == nil || !v.Audio.AlexaPlayable || v.Audio.MIMEType != models.AudioMPEG {
		return "", time.Time{}, false
	}
	exp := now.Add(s.audio.ttl).UTC().Truncate(time.Millisecond)
	tok, err := s.audio.mint(audioGrant{exp: exp, n: v.N, hash: v.Hash, patient: v.Patient, domain: v.Domain})
	if err != nil {
		s.logger.Error("bridge: cannot mint a clip URL", "uri", v.URI().String(), "err", err)
		return "", time.Time{}, false
	}
	return s.pub.base + audioPath + tok, exp, true
}

// serveAudio answers GET|HEAD /audio/{token}: the MP3 bytes of the one
// version the token names, while it has not expired, read through a
// principal holding care.read.user for that patient alone — so the same two
// checks as any read (P-1) — and served only if the bytes match the
// version hash in the token and its chain (store.ReadAudio, P-5). Every
// failure — a token this server did not mint, an expired one, a version no
// longer stored, a clip that is not an Alexa MP3 — is the same 404. A
// success is 200 (206 for a Range) with Content-Type audio/mpeg and
// Cache-Control private, max-age of the seconds the URL has left.
func (s *Server) serveAudio(w http.ResponseWriter, r *http.Request) {
	notFound := func() {
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, "not found", http.StatusNotFound)
	}
	g, ok := s.audio.open(chi.URLParam(r, "token"))
	now := s.now()
	if !ok || !now.Before(g.exp) {
		notFound()
		return
	}
	p := models.Principal{Subject: "audio-url", Scopes: []models.Scope{models.ScopeReadUser}, Patients: []string{g.patient}}
	uri := models.NewURI(models.AudienceUser, g.patient, g.domain).WithVersion(g.n)
	rr, err := s.st.ReadAudio(r.Context(), p, uri.String())
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			s.logger.Info("audio: clip not served", "uri", uri.String(), "err", err)
		}
		notFound()
		return
	}
	v := rr.Version
	// The version must still be the fact's current one: a clip revised
	// since the URL was minted is not played as current (P-24).
	if v.Hash != g.hash || v.N != rr.Latest || v.Audience != models.AudienceUser || v.Audio == nil || v.Audio.MIMEType != models.AudioMPEG || !v.Audio.AlexaPlayable {
		notFound()
		return
	}
	h := w.Header()
	h.Set("Content-Type", models.AudioMPEG)
	h.Set("Cache-Control", "private, max-age="+strconv.Itoa(int(g.exp.Sub(now)/time.Second)))
	h.Set("Referrer-Policy", "no-referrer")
	http.ServeContent(w, r, "", v.WrittenAt, bytes.NewReader(v.Audio.Data))
}

// clipContents is the BlobResourceContents of an audio fact's read, after
// its text contents: the bytes (base64 on the wire), their MIME type, and
// the text's _meta with the audio keys (models.AudioMeta) — for the
// current version of a speakable clip, a signed URL (clipURL); never for
// an assistant-only one or a superseded version.
func (s *Server) clipContents(uri string, v models.Version, m models.ReadMeta, now time.Time) *mcp.ResourceContents {
	a := *v.Audio
	if !m.Superseded() {
		a.URL, a.URLExpires, _ = s.clipURL(v, now)
	}
	return &mcp.ResourceContents{URI: uri, MIMEType: a.MIMEType, Blob: a.Data, Meta: mcp.Meta(models.AudioMeta(m, a))}
}

// maxClipResponseBytes bounds one resources/read response of an audio
// fact on the wire: the largest clip in base64 and the JSON around it.
var maxClipResponseBytes = base64.StdEncoding.EncodedLen(models.MaxAudioBytes) + 64<<10

// responseStreamOptions are the bounds of a POST's response stream (and of
// a replay of one): the session's StreamOptions with a queue that holds
// at least one read of the largest clip, so such a read is never refused
// by the bound that protects other clients from one that stopped reading
// (P-25). That bound still holds: one request's response is finite. The
// standalone GET stream, which only ever carries notifications, keeps
// Config.StreamQueueBytes.
func (s *Server) responseStreamOptions() StreamOptions {
	o := s.streamOpts
	o.QueueBytes = max(o.QueueBytes, maxClipResponseBytes)
	return o
}
