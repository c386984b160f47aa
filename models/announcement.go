package models

import "time"

// Announcement is something the patient must hear before anything else on
// his next turn: a fact that changed since the version he last heard, or
// one he has never heard (P-19). It holds record fields only; the sentence
// is rendered at speak time with Render.
type Announcement struct {
	ID      int64    // the queue's id, stable across restarts
	Patient string   // patient id
	Heard   *Version // the version the patient last heard; nil if never
	Current Version  // the latest version, read over MCP as care.read.user
}

// URI is the unversioned URI of the announced fact.
func (a Announcement) URI() URI { return a.Current.FactURI() }

// Render returns the sentence to speak at now: RenderRetraction(heard,
// current) when he heard an older version, RenderFirstHearing otherwise.
// It returns ErrUnchanged when the words he heard did not change (nothing
// to say), and ErrAssistantAudience for an assistant-only version.
func (a Announcement) Render(now time.Time) (string, error) {
	if a.Heard == nil {
		return RenderFirstHearing(a.Current, now)
	}
	return RenderRetraction(*a.Heard, a.Current, now)
}

// IsRetraction reports whether speaking a withdraws something he heard.
func (a Announcement) IsRetraction() bool { return a.Heard != nil }
