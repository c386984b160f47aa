package models

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// ProtocolVersion is the MCP revision of the stateful Streamable HTTP
// sessions the MCP server serves and the speech principal opens: 2025-11-25
// (initialize, resources/subscribe, the standalone GET event stream,
// resumable with Last-Event-ID).
const ProtocolVersion = "2025-11-25"

// The _meta keys on a care resource's resources/read contents: the one definition of the read contract that the MCP
// server writes (ReadMeta.Map) and the speech principal reads
// (ParseReadMeta).
const (
	MetaVersion      = "unsay/version"       // integer ≥ 1: the version served
	MetaLatest       = "unsay/latestVersion" // integer ≥ unsay/version: the fact's latest version
	MetaVersionHash  = "unsay/versionHash"   // lowercase hex SHA-256 (P-5)
	MetaPrevHash     = "unsay/prevHash"      // lowercase hex; "" for version 1
	MetaAudience     = "unsay/audience"      // "user" | "assistant"
	MetaLastModified = "unsay/lastModified"  // TimeLayout (UTC, milliseconds): when the version was written
	MetaStale        = "unsay/stale"         // bool: past its review date at the server clock (P-7); false for a superseded version
	MetaAuthor       = "unsay/author"        // the author's label, "Sarah Okafor, physio"
	MetaAuthorID     = "unsay/authorId"      // the author's id, "okafor"
	MetaRetraction   = "unsay/retraction"    // optional: the sentence withdrawing what this session read before (P-17)
	MetaStaleAfter   = "unsay/staleAfter"    // optional, TimeLayout: the latest version's review date, still ahead when served (finding U15: an open screen marks it when it passes)
)

// ErrReadFormat wraps every refusal of ParseReadMeta and DecodeRead: a
// missing or mistyped key, a version out of range, an unknown audience, a
// bad time or an empty author label.
var ErrReadFormat = errors.New("not an Unsay care read")

// ReadMeta is the _meta of one care resource's contents: which version was
// served, its chain hashes, audience, time and author, whether it was past
// its review date at the server clock when served, and the retraction the
// server rendered for this session (P-17), if any.
type ReadMeta struct {
	Version      int
	Latest       int
	VersionHash  string
	PrevHash     string
	Audience     Audience
	LastModified time.Time // UTC, milliseconds
	Stale        bool
	AuthorLabel  string
	AuthorID     string
	Retraction   string // "" when there is none (the key is then absent)
	// StaleAfter is the latest version's review date when it is still
	// ahead at the server clock (zero otherwise: none, passed — Stale says
	// so — or a superseded version; the key is then absent), so a client
	// holding the version can mark it stale when the date passes without
	// reading it again (U15).
	StaleAfter time.Time
}

// NewReadMeta describes version v served when latest is its fact's latest
// version, at the server clock now: Stale is v.IsStale(now) for the latest
// version and false for a superseded one (P-7).
func NewReadMeta(v Version, latest int, now time.Time) ReadMeta {
	return ReadMeta{
		Version:      v.N,
		Latest:       latest,
		VersionHash:  v.Hash,
		PrevHash:     v.PrevHash,
		Audience:     v.Audience,
		LastModified: v.WrittenAt.UTC().Truncate(time.Millisecond),
		Stale:        v.N >= latest && v.IsStale(now),
		AuthorLabel:  v.AuthorLabel,
		AuthorID:     v.AuthorID,
		StaleAfter:   staleAhead(v, latest, now),
	}
}

// staleAhead is v's review date when v is the latest version and the date
// is after now; zero otherwise.
func staleAhead(v Version, latest int, now time.Time) time.Time {
	if v.N < latest || v.StaleAfter.IsZero() || !v.StaleAfter.After(now) || v.IsStale(now) {
		return time.Time{}
	}
	return v.StaleAfter.UTC().Truncate(time.Millisecond)
}

// Superseded reports whether the version served is older than the fact's
// latest (read by its /v{n} URI).
func (m ReadMeta) Superseded() bool { return m.Version < m.Latest }

// Map returns the _meta object: every key above, unsay/retraction only when
// Retraction is set. Integers are Go ints (JSON numbers on the wire).
func (m ReadMeta) Map() map[string]any {
	out := map[string]any{
		MetaVersion:      m.Version,
		MetaLatest:       m.Latest,
		MetaVersionHash:  m.VersionHash,
		MetaPrevHash:     m.PrevHash,
		MetaAudience:     string(m.Audience),
		MetaLastModified: m.LastModified.UTC().Format(TimeLayout),
		MetaStale:        m.Stale,
		MetaAuthor:       m.AuthorLabel,
		MetaAuthorID:     m.AuthorID,
	}
	if m.Retraction != "" {
		out[MetaRetraction] = m.Retraction
	}
	if !m.StaleAfter.IsZero() {
		out[MetaStaleAfter] = m.StaleAfter.UTC().Format(TimeLayout)
	}
	return out
}

// ParseReadMeta decodes a _meta object written by Map, after a JSON round
// trip (numbers as float64) or not (ints). It refuses, wrapping
// ErrReadFormat: a version < 1 or not an integer, a latest version below it,
// an unknown audience, a lastModified that is not RFC 3339, an empty author
// label, or a key of the wrong type. unsay/retraction and
// unsay/staleAfter (RFC 3339) are optional.
func ParseReadMeta(meta map[string]any) (ReadMeta, error) {
	var m ReadMeta
	var ok bool
	if m.Version, ok = metaInt(meta[MetaVersion]); !ok || m.Version < 1 {
		return ReadMeta{}, fmt.Errorf("%w: %s missing or not a version", ErrReadFormat, MetaVersion)
	}
	if m.Latest, ok = metaInt(meta[MetaLatest]); !ok || m.Latest < m.Version {
		return ReadMeta{}, fmt.Errorf("%w: %s missing or below %s", ErrReadFormat, MetaLatest, MetaVersion)
	}
	strs := []struct {
		key string
		dst *string
	}{{MetaVersionHash, &m.VersionHash}, {MetaPrevHash, &m.PrevHash}, {MetaAuthor, &m.AuthorLabel}, {MetaAuthorID, &m.AuthorID}}
	for _, s := range strs {
		if *s.dst, ok = meta[s.key].(string); !ok {
			return ReadMeta{}, fmt.Errorf("%w: %s missing or not a string", ErrReadFormat, s.key)
		}
	}
	if m.AuthorLabel == "" {
		return ReadMeta{}, fmt.Errorf("%w: empty %s", ErrReadFormat, MetaAuthor)
	}
	aud, _ := meta[MetaAudience].(string)
	if m.Audience = Audience(aud); !m.Audience.Valid() {
		return ReadMeta{}, fmt.Errorf("%w: %s %q", ErrReadFormat, MetaAudience, aud)
	}
	lm, _ := meta[MetaLastModified].(string)
	t, err := time.Parse(time.RFC3339Nano, lm)
	if err != nil {
		return ReadMeta{}, fmt.Errorf("%w: %s %q", ErrReadFormat, MetaLastModified, lm)
	}
	m.LastModified = t.UTC()
	if m.Stale, ok = meta[MetaStale].(bool); !ok {
		return ReadMeta{}, fmt.Errorf("%w: %s missing or not a bool", ErrReadFormat, MetaStale)
	}
	if r, present := meta[MetaRetraction]; present {
		if m.Retraction, ok = r.(string); !ok {
			return ReadMeta{}, fmt.Errorf("%w: %s not a string", ErrReadFormat, MetaRetraction)
		}
	}
	if r, present := meta[MetaStaleAfter]; present {
		sa, _ := r.(string)
		t, err := time.Parse(time.RFC3339Nano, sa)
		if err != nil {
			return ReadMeta{}, fmt.Errorf("%w: %s %q", ErrReadFormat, MetaStaleAfter, sa)
		}
		m.StaleAfter = t.UTC()
	}
	return m, nil
}

// ListMeta is the _meta of a care fact's resources/list entry: the version
// current when the list was served, its chain hash, and whether it was past
// its review date at the server clock then (P-7). Versions are immutable
// and named by their hash (P-5), so a client already holding that version
// with that hash holds the current words without reading them again, and
// learns their staleness from Stale (P-24: the speech principal's
// confirmation round at speak time). Same keys as ReadMeta.
type ListMeta struct {
	Version     int
	VersionHash string
	Stale       bool
}

// NewListMeta describes v, a fact's latest version, listed at the server
// clock now.
func NewListMeta(v Version, now time.Time) ListMeta {
	return ListMeta{Version: v.N, VersionHash: v.Hash, Stale: v.IsStale(now)}
}

// Map returns the list entry's _meta object: unsay/version,
// unsay/versionHash and unsay/stale.
func (m ListMeta) Map() map[string]any {
	return map[string]any{MetaVersion: m.Version, MetaVersionHash: m.VersionHash, MetaStale: m.Stale}
}

// ParseListMeta decodes a _meta object written by ListMeta.Map, after a
// JSON round trip or not. It refuses, wrapping ErrReadFormat, a missing
// key, a version < 1 or not an integer, an empty hash, or a key of the
// wrong type — the entry of a server that does not describe its versions,
// whose facts the client then reads.
func ParseListMeta(meta map[string]any) (ListMeta, error) {
	var m ListMeta
	var ok bool
	if m.Version, ok = metaInt(meta[MetaVersion]); !ok || m.Version < 1 {
		return ListMeta{}, fmt.Errorf("%w: %s missing or not a version", ErrReadFormat, MetaVersion)
	}
	if m.VersionHash, ok = meta[MetaVersionHash].(string); !ok || m.VersionHash == "" {
		return ListMeta{}, fmt.Errorf("%w: %s missing or not a hash", ErrReadFormat, MetaVersionHash)
	}
	if m.Stale, ok = meta[MetaStale].(bool); !ok {
		return ListMeta{}, fmt.Errorf("%w: %s missing or not a bool", ErrReadFormat, MetaStale)
	}
	return m, nil
}

// metaInt reads an integer-valued key: a Go int, or a JSON number decoded
// as float64 with no fraction.
func metaInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), x >= math.MinInt32 && x <= math.MaxInt32
	case float64:
		if x != math.Trunc(x) || x > math.MaxInt32 || x < math.MinInt32 {
			return 0, false
		}
		return int(x), true
	}
	return 0, false
}

// Headers the server puts on their own line before a value.
const (
	staleHeaderPrefix      = "[STALE — "
	supersededHeaderPrefix = "[SUPERSEDED — "
)

// StaleHeader is the line that starts a stale fact's text wherever it is
// served (P-7): "[STALE — last changed {age} by {author label}; say this age
// aloud]", the age from writtenAt to the server clock now.
func StaleHeader(v Version, now time.Time) string {
	return fmt.Sprintf("%slast changed %s by %s; say this age aloud]", staleHeaderPrefix, SpokenAge(now.Sub(v.WrittenAt)), v.AuthorLabel)
}

// SupersededHeader is the line that starts an older version's text when it
// is read by its /v{n} URI: "[SUPERSEDED — this is version {n}; version
// {latest} is current at {fact URI}; do not speak this as current]".
func SupersededHeader(v Version, latest int) string {
	return fmt.Sprintf("%sthis is version %d; version %d is current at %s; do not speak this as current]", supersededHeaderPrefix, v.N, latest, v.FactURI())
}

// ReadText is the text of version v's contents as served with m at now:
// the value, after SupersededHeader and a newline when m.Superseded(), or
// after StaleHeader and a newline when m.Stale.
func ReadText(v Version, m ReadMeta, now time.Time) string {
	switch {
	case m.Superseded():
		return SupersededHeader(v, m.Latest) + "\n" + v.Value
	case m.Stale:
		return StaleHeader(v, now) + "\n" + v.Value
	}
	return v.Value
}

// ReadValue returns the value as the clinician wrote it from a text served
// with m: it removes the one header line ReadText put there — SUPERSEDED
// for a superseded version, STALE for a stale one — and nothing else, so a
// value that itself starts with "[" is kept whole.
func ReadValue(text string, m ReadMeta) string {
	prefix := ""
	switch {
	case m.Superseded():
		prefix = supersededHeaderPrefix
	case m.Stale:
		prefix = staleHeaderPrefix
	default:
		return text
	}
	if !strings.HasPrefix(text, prefix) {
		return text
	}
	header, value, ok := strings.Cut(text, "\n")
	if !ok || !strings.HasSuffix(header, "]") {
		return text
	}
	return value
}

// StripStaleHeader removes a leading STALE header line (P-7) from text and
// reports whether one was there. It is for text whose _meta is not at hand
// (defence in depth in the skill); with the _meta, use ReadValue.
func StripStaleHeader(text string) (string, bool) {
	t := strings.TrimLeft(text, " \t\r\n")
	if !strings.HasPrefix(t, staleHeaderPrefix) {
		return text, false
	}
	i := strings.IndexByte(t, ']')
	if i < 0 {
		return text, false
	}
	return strings.TrimLeft(t[i+1:], " \t\r\n"), true
}

// DecodeRead turns the contents of a resources/read of the care URI u
// (versioned or not) into the Version it serves: record fields from meta,
// the value without its header, patient and domain from u, and the
// server's judgement of its review date (unsay/stale) as ServedStale, so
// it is stale at every time after the read (P-7, P-24). It refuses,
// wrapping ErrReadFormat, what ParseReadMeta refuses, a version other than
// the one u names, and a record whose audience is not u's scheme's (P-1).
func DecodeRead(u URI, text string, meta map[string]any) (Version, ReadMeta, error) {
	m, err := ParseReadMeta(meta)
	if err != nil {
		return Version{}, ReadMeta{}, fmt.Errorf("%s: %w", u, err)
	}
	if u.Version != 0 && m.Version != u.Version {
		return Version{}, ReadMeta{}, fmt.Errorf("%w: %s served version %d", ErrReadFormat, u, m.Version)
	}
	if m.Audience != u.Audience() {
		return Version{}, ReadMeta{}, fmt.Errorf("%w: %s served a record of audience %q", ErrReadFormat, u, m.Audience)
	}
	v := Version{
		Patient:     u.Patient,
		Domain:      u.Domain,
		N:           m.Version,
		Audience:    m.Audience,
		Value:       ReadValue(text, m),
		AuthorID:    m.AuthorID,
		AuthorLabel: m.AuthorLabel,
		WrittenAt:   m.LastModified,
		PrevHash:    m.PrevHash,
		Hash:        m.VersionHash,
		ServedStale: m.Stale,
		StaleAfter:  m.StaleAfter, // zero unless still ahead when served: IsStale turns at it (U15)
	}
	return v, m, nil
}

// The _meta keys an audio fact's BlobResourceContents carries besides every
// key of ReadMeta.Map (the same record, the same values): resources/read of
// an audio fact answers its text contents (the description, with the
// STALE or SUPERSEDED header) first, then its blob contents, same URI.
const (
	MetaAudioSHA256     = "unsay/audioSha256"     // lowercase hex SHA-256 of the blob's bytes (the chain hash covers it, P-5)
	MetaAudioDuration   = "unsay/audioDurationMs" // integer ≥ 0: the clip's length in milliseconds
	MetaAudioAlexa      = "unsay/audioAlexa"      // bool: an MP3 Alexa's SSML <audio> plays
	MetaAudioURL        = "unsay/audioUrl"        // optional: a signed, short-lived URL serving the bytes (speakable clips only)
	MetaAudioURLExpires = "unsay/audioUrlExpires" // with unsay/audioUrl: TimeLayout, when the URL stops being served
)

// AudioMeta returns the _meta of an audio fact's blob contents: m.Map()
// and the audio keys of a (unsay/audioUrl and its expiry only when a.URL
// is set).
func AudioMeta(m ReadMeta, a Audio) map[string]any {
	out := m.Map()
	out[MetaAudioSHA256] = a.SHA256
	out[MetaAudioDuration] = int(a.Duration / time.Millisecond)
	out[MetaAudioAlexa] = a.AlexaPlayable
	if a.URL != "" {
		out[MetaAudioURL] = a.URL
		out[MetaAudioURLExpires] = a.URLExpires.UTC().Format(TimeLayout)
	}
	return out
}

// DecodeReadAudio decodes the blob contents (mimeType, the decoded bytes,
// _meta) of the care URI u that accompany the text contents v was decoded
// from (DecodeRead). It refuses, wrapping ErrReadFormat: a _meta that
// ParseReadMeta refuses or that names another version or hash than v's, a
// MIME type other than AudioMPEG and AudioWAV, no bytes or more than
// MaxAudioBytes, bytes whose SHA-256 is not unsay/audioSha256, a duration
// that is not a whole number ≥ 0, and a URL that is not absolute http(s)
// or lacks its expiry. The result holds the bytes in Data.
func DecodeReadAudio(u URI, v Version, mimeType string, blob []byte, meta map[string]any) (Audio, error) {
	m, err := ParseReadMeta(meta)
	if err != nil {
		return Audio{}, fmt.Errorf("%s audio: %w", u, err)
	}
	if m.Version != v.N || m.VersionHash != v.Hash || m.Audience != v.Audience {
		return Audio{}, fmt.Errorf("%w: %s audio belongs to another version", ErrReadFormat, u)
	}
	if mimeType != AudioMPEG && mimeType != AudioWAV {
		return Audio{}, fmt.Errorf("%w: %s audio type %q", ErrReadFormat, u, mimeType)
	}
	if len(blob) == 0 || len(blob) > MaxAudioBytes {
		return Audio{}, fmt.Errorf("%w: %s audio of %d bytes", ErrReadFormat, u, len(blob))
	}
	sum, _ := meta[MetaAudioSHA256].(string)
	if got := sha256Hex(blob); sum != got {
		return Audio{}, fmt.Errorf("%w: %s audio bytes do not match %s", ErrReadFormat, u, MetaAudioSHA256)
	}
	ms, ok := metaInt(meta[MetaAudioDuration])
	if !ok || ms < 0 {
		return Audio{}, fmt.Errorf("%w: %s missing or not a duration", ErrReadFormat, MetaAudioDuration)
	}
	alexa, _ := meta[MetaAudioAlexa].(bool)
	a := Audio{MIMEType: mimeType, Size: len(blob), Duration: time.Duration(ms) * time.Millisecond, SHA256: sum,
		AlexaPlayable: alexa, Data: blob}
	if raw, present := meta[MetaAudioURL]; present {
		s, _ := raw.(string)
		if !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
			return Audio{}, fmt.Errorf("%w: %s is not an http(s) URL", ErrReadFormat, MetaAudioURL)
		}
		exp, _ := meta[MetaAudioURLExpires].(string)
		t, err := time.Parse(time.RFC3339Nano, exp)
		if err != nil {
			return Audio{}, fmt.Errorf("%w: %s %q", ErrReadFormat, MetaAudioURLExpires, exp)
		}
		a.URL, a.URLExpires = s, t.UTC()
	}
	return a, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
