package speech

import (
	"errors"
	"fmt"
	"math"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/unsay/unsay/models"
)

// ErrBadResource: a read result the speech principal refuses to hold — no
// contents for the URI asked, or contents that are not the read contract
// (models.DecodeRead: a missing or malformed _meta key, another version
// than the one asked for, an audience other than user).
var ErrBadResource = errors.New("speech: unusable resource contents")

// parseRead turns a resources/read result for asked (a care:// URI,
// versioned or not) into the Version it serves, decoded by the read
// contract (models.DecodeRead): the value as the clinician wrote it,
// without the server's STALE or SUPERSEDED header line. Staleness is the
// server's judgement at the time of the read (P-7, P-24): a version served
// stale has ServedStale set, so IsStale holds at any time — also at a turn's
// "now", taken before the confirming read; one served fresh carries the
// review date still ahead (unsay/staleAfter; zero when it has none), so it
// turns stale when that passes, read again or not (U15).
// It also returns the highest version number the server named (for
// readiness, even when the contents are refused). Errors wrap
// ErrBadResource.
func parseRead(asked models.URI, res *mcp.ReadResourceResult) (models.Version, int, error) {
	if asked.Audience() != models.AudienceUser {
		// P-1 held on this side too: only user-audience records are kept.
		return models.Version{}, 0, fmt.Errorf("%w: %s is not speakable", ErrBadResource, asked)
	}
	if res == nil {
		return models.Version{}, 0, fmt.Errorf("%w: empty result for %s", ErrBadResource, asked)
	}
	var c *mcp.ResourceContents
	for _, rc := range res.Contents {
		if rc != nil && rc.URI == asked.String() && rc.Blob == nil {
			c = rc
			break
		}
	}
	if c == nil {
		return models.Version{}, 0, fmt.Errorf("%w: no contents for %s", ErrBadResource, asked)
	}
	v, m, err := models.DecodeRead(asked, c.Text, c.Meta)
	if err != nil {
		return models.Version{}, namedVersion(c.Meta), fmt.Errorf("%w: %w", ErrBadResource, err)
	}
	// An audio fact's blob contents follow its text (models.DecodeReadAudio):
	// the principal keeps what the clip is and its signed URL, not its bytes.
	for _, rc := range res.Contents {
		if rc != nil && rc != c && rc.URI == asked.String() && rc.Blob != nil {
			a, err := models.DecodeReadAudio(asked, v, rc.MIMEType, rc.Blob, rc.Meta)
			if err != nil {
				return models.Version{}, m.Latest, fmt.Errorf("%w: %w", ErrBadResource, err)
			}
			a.Data = nil
			v.Audio = &a
			break
		}
	}
	return v, m.Latest, nil
}

// namedVersion is the highest whole version number contents refused by
// the read contract still name (0: none), so that readiness counts the
// version as seen: it was read, and refused.
func namedVersion(meta map[string]any) int {
	n := 0
	for _, k := range []string{models.MetaVersion, models.MetaLatest} {
		if f, ok := meta[k].(float64); ok && f == math.Trunc(f) && f > 0 && f < math.MaxInt32 {
			n = max(n, int(f))
		}
	}
	return n
}
