package speech

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// The _meta keys the Unsay MCP server puts on a care resource's contents
// (DESIGN.md, Interfaces › MCP).
const (
	metaVersion      = "unsay/version"
	metaVersionHash  = "unsay/versionHash"
	metaPrevHash     = "unsay/prevHash"
	metaAudience     = "unsay/audience"
	metaLastModified = "unsay/lastModified"
	metaStale        = "unsay/stale"
	metaStaleAfter   = "unsay/staleAfter"
	metaAuthor       = "unsay/author"
	metaAuthorID     = "unsay/authorId"
	metaAuthorLabel  = "unsay/authorLabel"
	metaPriority     = "unsay/priority"
	metaLatest       = "unsay/latestVersion"
)

// ErrBadResource: a read result the speech principal refuses to hold — no
// text contents for the URI asked, a missing or malformed _meta field, a
// version other than the one asked for, or an audience other than user.
var ErrBadResource = errors.New("speech: unusable resource contents")

// Headers the server may put before a value (P-7 and superseded reads).
const (
	staleHeaderPrefix      = "[STALE"
	supersededHeaderPrefix = "[SUPERSEDED"
)

// readVersion is one version as read over MCP, with what the server said
// about its staleness when it was read.
type readVersion struct {
	models.Version
	Stale bool // the server served it with the STALE header (P-7)
}

// parseRead turns a resources/read result for asked (a care:// URI,
// versioned or not) into a Version. It strips the "[SUPERSEDED …]" header
// of an older version (unsay/version < unsay/latestVersion; without
// latestVersion, any versioned read) and the "[STALE …]" header of a stale
// one (unsay/stale), so Version.Value is the value as the clinician wrote
// it, and keeps staleness in Stale and StaleAfter.
// now is the time of the read: when the server says the version is stale
// but not since when, StaleAfter is set to now (it was stale at now).
// Errors wrap ErrBadResource.
func parseRead(asked models.URI, res *mcp.ReadResourceResult, now time.Time) (readVersion, error) {
	if res == nil {
		return readVersion{}, fmt.Errorf("%w: empty result for %s", ErrBadResource, asked)
	}
	var c *mcp.ResourceContents
	for _, rc := range res.Contents {
		if rc != nil && rc.URI == asked.String() {
			c = rc
			break
		}
	}
	if c == nil && len(res.Contents) == 1 && res.Contents[0] != nil {
		c = res.Contents[0]
		if u, err := models.ParseURI(c.URI); err != nil || u.Unversioned() != asked.Unversioned() {
			return readVersion{}, fmt.Errorf("%w: contents name another resource than %s", ErrBadResource, asked)
		}
	}
	if c == nil {
		return readVersion{}, fmt.Errorf("%w: no contents for %s", ErrBadResource, asked)
	}
	m := c.Meta
	v := readVersion{Version: models.Version{Patient: asked.Patient, Domain: asked.Domain}}

	n, ok := metaInt(m, metaVersion)
	if !ok || n < 1 {
		return readVersion{}, fmt.Errorf("%w: %s: missing or bad %s", ErrBadResource, asked, metaVersion)
	}
	if asked.Version != 0 && n != asked.Version {
		return readVersion{}, fmt.Errorf("%w: asked %s, served version %d", ErrBadResource, asked, n)
	}
	v.N = n

	aud, _ := m[metaAudience].(string)
	if models.Audience(aud) != asked.Audience() || models.Audience(aud) != models.AudienceUser {
		// P-1 held on this side too: only user-audience records are kept.
		return readVersion{}, fmt.Errorf("%w: %s: audience %q is not speakable", ErrBadResource, asked, aud)
	}
	v.Audience = models.AudienceUser

	lm, _ := m[metaLastModified].(string)
	t, err := time.Parse(time.RFC3339Nano, lm)
	if err != nil {
		return readVersion{}, fmt.Errorf("%w: %s: bad %s", ErrBadResource, asked, metaLastModified)
	}
	v.WrittenAt = t.UTC()

	v.Hash, _ = m[metaVersionHash].(string)
	v.PrevHash, _ = m[metaPrevHash].(string)
	if p, ok := m[metaPriority].(float64); ok {
		v.Priority = p
	}
	v.AuthorID, v.AuthorLabel = parseAuthor(m)
	if v.AuthorLabel == "" {
		return readVersion{}, fmt.Errorf("%w: %s: no author label", ErrBadResource, asked)
	}

	v.Stale, _ = m[metaStale].(bool)
	if sa, ok := m[metaStaleAfter].(string); ok && sa != "" {
		if t, err := time.Parse(time.RFC3339Nano, sa); err == nil {
			v.StaleAfter = t.UTC()
		}
	}
	if v.Stale && (v.StaleAfter.IsZero() || v.StaleAfter.After(now)) {
		v.StaleAfter = now.UTC()
	}

	// The server marks a superseded version (read by /v{n}) with a
	// "[SUPERSEDED …]" line and a stale current one with "[STALE …]".
	superseded := asked.Version != 0
	if latest, ok := metaInt(m, metaLatest); ok {
		superseded = n < latest
	}
	text := c.Text
	if superseded && strings.HasPrefix(text, supersededHeaderPrefix) {
		text = stripHeader(text)
	}
	if v.Stale && strings.HasPrefix(text, staleHeaderPrefix) {
		text = stripHeader(text)
	}
	v.Value = text
	return v, nil
}

// stripHeader removes one leading bracketed header ("[STALE …]",
// "[SUPERSEDED …]") and the white space after it.
func stripHeader(text string) string {
	i := strings.IndexByte(text, ']')
	if !strings.HasPrefix(text, "[") || i < 0 {
		return text
	}
	return strings.TrimLeft(text[i+1:], " \t\r\n")
}

// parseAuthor reads the author from unsay/author — an object
// {"authorId","authorLabel"} (also "id"/"label"), a JSON string holding
// that object, or a plain string taken as the label — or from the flat keys
// unsay/authorId and unsay/authorLabel.
func parseAuthor(m mcp.Meta) (id, label string) {
	fromMap := func(a map[string]any) {
		for _, k := range []string{"authorId", "id"} {
			if s, ok := a[k].(string); ok && id == "" {
				id = s
			}
		}
		for _, k := range []string{"authorLabel", "label"} {
			if s, ok := a[k].(string); ok && label == "" {
				label = s
			}
		}
	}
	switch a := m[metaAuthor].(type) {
	case map[string]any:
		fromMap(a)
	case string:
		var obj map[string]any
		if strings.HasPrefix(strings.TrimSpace(a), "{") && json.Unmarshal([]byte(a), &obj) == nil {
			fromMap(obj)
		} else {
			label = a
		}
	}
	if s, ok := m[metaAuthorID].(string); ok && id == "" {
		id = s
	}
	if s, ok := m[metaAuthorLabel].(string); ok && label == "" {
		label = s
	}
	return id, label
}

// metaInt reads an integer-valued _meta key (JSON numbers decode as float64).
func metaInt(m mcp.Meta, key string) (int, bool) {
	switch x := m[key].(type) {
	case float64:
		if x != math.Trunc(x) || x > math.MaxInt32 || x < math.MinInt32 {
			return 0, false
		}
		return int(x), true
	case int:
		return x, true
	case int64:
		return int(x), true
	case json.Number:
		n, err := x.Int64()
		return int(n), err == nil
	}
	return 0, false
}
